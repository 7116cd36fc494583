"""Which processes belong to the recorded tree, from the kernel's fork events (the proc connector).

A writer that forks a child per file, or spawns `dd`, may write and exit before anyone reads
/proc/<pid>: its ancestry is gone by the time its file events are read. The proc connector
(drivers/connector/cn_proc.c, <linux/cn_proc.h>; CAP_NET_ADMIN) sends a PROC_EVENT_FORK for every
fork and clone with the parent's and the child's tgid, so membership is decided at fork time:
a process is in the tree when it is the root or was forked by a member. Since Linux 6.6 a listener
may ask for fork events only (`struct proc_input`); older kernels take the 4-byte op and send all.

Every process's forks and execs come to a listener: on a busy machine, each woke the file-activity
reader in its merge pause, where only the tree's execs need a prompt look (to read a short-lived
writer's /proc while it runs) and forks only need reading before the next file events are judged.
Since Linux 6.6 the filter is per socket (drivers/connector/cn_proc.c cn_filter: `proc_input` is
kept on the socket), so forks go to one socket (`sock`, drained before each read of file events)
and execs and comms to another (`exec_sock`, the one `fileno()` gives to wait on); older kernels
send every event to every listener, and one socket takes them all.

Where the connector cannot be opened, or lost events (ENOBUFS: its socket buffer overflowed), a
pid is looked up by walking /proc/<pid>/stat's ppid up to the root, which sees only processes still
alive; `basis` says which rule is in use and why.

A process's name when it forked (`comm_at`): a child gets its parent's comm at fork, which is the
parent's last rename (PROC_EVENT_COMM) or exec before the fork, each stamped by the kernel
(`timestamp_ns`, CLOCK_MONOTONIC), else what it got at its own fork, else, for the root, its comm
read when it became the root. An exec's event carries no name: it is the comm read from /proc when
the event is taken, and counts only where no rename came between the exec and that read. Where
none of these is known the name is not known: a parent's later name is never given as the one its
child copied.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import time

NETLINK_CONNECTOR = 11
CN_IDX_PROC = 1
CN_VAL_PROC = 1
PROC_CN_MCAST_LISTEN = 1
PROC_EVENT_FORK = 0x1
PROC_EVENT_EXEC = 0x2
# prctl(PR_SET_NAME) and a write to /proc/<pid>/comm (kernel/sys.c, fs/proc/base.c call
# proc_comm_connector); an exec sets the comm too but sends only PROC_EVENT_EXEC (fs/exec.c
# __set_task_comm calls no connector): seen here, a prctl gave a comm event, an exec none
PROC_EVENT_COMM = 0x200
NLMSG_DONE = 3
_NLMSG = struct.Struct("=IHHII")  # struct nlmsghdr
_CN_MSG = struct.Struct("=IIIIHH")  # struct cn_msg: id.idx, id.val, seq, ack, len, flags
_EVENT = struct.Struct("=IIQiiii")  # struct proc_event: what, cpu, timestamp_ns, fork's four pids
RCVBUF_BYTES = 8 << 20
MAX_NAMES = 32  # renames and execs kept per process (the oldest go; a name before them is then unknown)
_ALL_KINDS = PROC_EVENT_FORK | PROC_EVENT_EXEC | PROC_EVENT_COMM


def _filters_per_socket(release: str | None = None) -> bool:
    """Whether this kernel keeps each listener's event filter (`struct proc_input`, Linux 6.6)."""
    try:
        major, minor = (int(x) for x in (release or os.uname().release).split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (6, 6)


def ppid_of(pid: int, proc: str = "/proc") -> int | None:
    """The parent of a live process (the 4th field of /proc/<pid>/stat, after the comm's ')')."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            s = f.read()
        return int(s[s.rindex(b")") + 2 :].split(None, 2)[1])
    except (OSError, ValueError, IndexError):
        return None


def describe(pid: int, proc: str = "/proc") -> dict:
    """A process's parent, comm and command line, read now (it may be gone later)."""
    out: dict = {"pid": pid, "ppid": ppid_of(pid, proc)}
    try:
        with open(f"{proc}/{pid}/comm", "rb") as f:
            out["comm"] = f.read().decode(errors="replace").strip()
        with open(f"{proc}/{pid}/cmdline", "rb") as f:
            out["cmdline"] = [a.decode(errors="replace") for a in f.read().split(b"\0") if a][:16]
    except OSError:
        out["comm"] = None
    return out


class ProcTree:
    """Membership of the recorded process tree; `root` is set once the command is spawned."""

    def __init__(self, proc: str = "/proc"):
        self.root: int | None = None
        self.members: set[int] = set()
        self._pending: list[tuple[int, int, int]] = []  # forks seen before the root was known (ts)
        self._proc = proc
        self._cache: dict[int, bool] = {}  # pid → in the tree, for /proc lookups
        self.parents: dict[int, int] = {}  # a member → the member that forked it
        self.execs: dict[int, dict] = {}
        self.comms: dict[int, str] = {}  # a member → its latest comm (PROC_EVENT_COMM: prctl PR_SET_NAME)
        # a member → its renames and execs in kernel time: (timestamp_ns, comm, read_ns), read_ns None
        # for a rename (the event names it), else when the exec'd comm was read from /proc (comm_at)
        self.names: dict[int, list[tuple[int, str | None, int | None]]] = {}
        self.forked_ns: dict[int, int] = {}  # a member forked in the tree → its fork's timestamp_ns
        self.root_comm: tuple[int, str | None] | None = None  # (read_ns, comm) read at set_root
        self.execs_lost = False  # an exec may have gone unseen (ENOBUFS): no name is inferred from a fork
        self.on_leave = None  # called with a pid found reused outside the tree (the C file reader's set)
        self.sock: socket.socket | None = None  # forks (every event where the kernel cannot filter)
        self.exec_sock: socket.socket | None = None  # execs and comms (Linux 6.6+)
        self.basis = "proc connector"
        try:
            if _filters_per_socket():
                try:
                    self.sock = self._open(PROC_EVENT_FORK)
                    self.exec_sock = self._open(PROC_EVENT_EXEC | PROC_EVENT_COMM)
                except OSError:
                    self.close()
            if self.sock is None:
                self.sock = self._open(_ALL_KINDS)
        except OSError as e:
            self.basis = f"/proc ancestry (proc connector: {e.strerror or e}): short-lived writers may be missed"

    @staticmethod
    def _open(kinds: int) -> socket.socket:
        s = socket.socket(
            socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, NETLINK_CONNECTOR
        )
        try:
            try:
                s.setsockopt(socket.SOL_SOCKET, 33, RCVBUF_BYTES)  # SO_RCVBUFFORCE (root)
            except OSError:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
            s.bind((0, CN_IDX_PROC))  # the kernel picks the port: one a socket
            # struct proc_input (6.6+): forks, and execs (to name a short-lived writer while it runs)
            body = struct.pack("=II", PROC_CN_MCAST_LISTEN, kinds)
            cn = _CN_MSG.pack(CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(body), 0) + body
            s.send(_NLMSG.pack(_NLMSG.size + len(cn), NLMSG_DONE, 0, 0, os.getpid()) + cn)
        except OSError:
            s.close()
            raise
        return s

    def fileno(self) -> int | None:
        """What to wait on to name the tree's next writers while they run: the exec socket where
        forks have their own, else the one socket."""
        s = self.exec_sock if self.exec_sock is not None else self.sock
        return None if s is None else s.fileno()

    def set_root(self, pid: int) -> None:
        self.root = pid
        self.members.add(pid)
        self.root_comm = (time.monotonic_ns(), describe(pid, self._proc)["comm"])
        for parent, child, ts in self._pending:
            if parent in self.members:
                self.members.add(child)
                self.parents[child] = parent
                self.forked_ns[child] = ts
        self._pending = []

    def drain(self) -> None:
        """Take the fork events queued now (call before judging the pids of file events read after).
        With two sockets the execs are taken first and handled after the forks: every fork before
        an exec taken is queued by then (the kernel reports a fork before the child runs)."""
        socks = [x for x in (self.exec_sock, self.sock) if x is not None]
        if not socks or not select.select(socks, [], [], 0)[0]:
            return  # one poll for both, called several times a read: no exception raised for nothing queued
        execs = []
        while self.exec_sock is not None:
            try:
                execs.append(self.exec_sock.recv(1 << 16))
            except BlockingIOError:
                break
            except OSError:  # ENOBUFS: execs lost, membership intact (the fork socket's); from now on a
                # writer is named from /proc at its first file event, and waits wake on forks
                self.exec_sock.close()
                self.exec_sock = None
                self.execs_lost = True
        while self.sock is not None:
            try:
                buf = self.sock.recv(1 << 16)
            except BlockingIOError:
                break
            except OSError as e:  # ENOBUFS: events were dropped; ancestry from /proc from now on
                self.basis = (
                    f"/proc ancestry (proc connector lost events: {e.strerror}): short-lived writers may be missed"
                )
                self.close()
                return
            self._take(buf)
        for buf in execs:
            self._take(buf)

    def _take(self, buf: bytes) -> None:
        off = 0
        while off + _NLMSG.size <= len(buf):
            nl_len = _NLMSG.unpack_from(buf, off)[0]
            ev = off + _NLMSG.size + _CN_MSG.size
            if ev + _EVENT.size <= len(buf):
                what, _cpu, _ts, _ppid, ptgid, cpid, ctgid = _EVENT.unpack_from(buf, ev)
                if what == PROC_EVENT_FORK and cpid == ctgid:  # a new process, not a thread
                    self._fork(ptgid, ctgid, _ts)
                elif what == PROC_EVENT_EXEC and _ppid == ptgid and ptgid in self.members:
                    self.execs[ptgid] = who = describe(ptgid, self._proc)  # exec's pid, tgid: the fork's first two
                    self._named(ptgid, (_ts, who["comm"], time.monotonic_ns()))
                elif what == PROC_EVENT_COMM and _ppid == ptgid and ptgid in self.members:
                    # pid, tgid, then char comm[16]: the name a writer gone before /proc is read had
                    raw = buf[ev + 24 : ev + 40]
                    self.comms[ptgid] = raw.split(b"\0", 1)[0].decode(errors="replace")
                    self._named(ptgid, (_ts, self.comms[ptgid], None))
            off += max(nl_len + 3 & ~3, _NLMSG.size)

    def _named(self, pid: int, entry: tuple[int, str | None, int | None]) -> None:
        names = self.names.setdefault(pid, [])
        names.append(entry)
        if len(names) > 1 and names[-2][0] > entry[0]:  # events of two CPUs may be queued out of time order
            names.sort(key=lambda e: e[0])
        if len(names) > MAX_NAMES:
            del names[0]

    def _fork(self, parent: int, child: int, ts: int = 0) -> None:
        if self.root is None:
            self._pending.append((parent, child, ts))
        elif parent in self.members:
            self.members.add(child)
            self.parents[child] = parent
            self.forked_ns[child] = ts
            for of_pid in (self.names, self.comms, self.execs):  # a pid reused: the old process's
                of_pid.pop(child, None)  # names, renames and exec are not this one's
        elif child != self.root:  # the root's own fork may be read after set_root
            self.members.discard(child)  # a pid reused outside the tree
            if self.on_leave is not None:
                self.on_leave(child)

    @property
    def sees_execs(self) -> bool:
        """Whether every exec (and comm change) of the tree is seen: none lost, the connector open."""
        return not self.execs_lost and self.sock is not None

    def comm_at(self, pid: int, ts_ns: int) -> str | None:
        return comm_at(self, pid, ts_ns)

    def contains(self, pid: int) -> bool:
        if pid in self.members:
            return True
        if self.sock is not None or self.root is None:
            return False
        hit = self._cache.get(pid)
        if hit is None:
            hit, p, seen = False, pid, 0
            while p and p > 1 and seen < 64:
                if p in self.members:
                    hit = True
                    break
                p, seen = ppid_of(p, self._proc), seen + 1
            if hit:
                self.members.add(pid)
            self._cache[pid] = hit
        return hit

    def close(self) -> None:
        for s in (self.sock, self.exec_sock):
            if s is not None:
                s.close()
        self.sock = self.exec_sock = None


def comm_at(tree, pid: int, ts_ns: int, depth: int = 0) -> str | None:
    """`pid`'s comm at kernel time `ts_ns` (module docstring), or None where that is not known.
    `tree` is a ProcTree or its frozen copy (fanreplay.FrozenTree): the same rule for both."""
    names = tree.names.get(pid, ())
    before = [e for e in names if e[0] <= ts_ns]
    if before:
        t, comm, read_ns = before[-1]
        if read_ns is None:
            return comm  # a rename: the event's own name
        # an exec: the comm read at read_ns is the exec's unless a rename came in between
        return None if any(r is None and t < c <= read_ns for c, _, r in names) else comm
    if len(names) >= MAX_NAMES or depth > 64:
        return None  # its earlier names were let go
    if pid in tree.forked_ns:
        return comm_at(tree, tree.parents[pid], tree.forked_ns[pid], depth + 1)  # what the fork copied
    if pid == tree.root and tree.root_comm is not None:
        read_ns, comm = tree.root_comm
        # its name since before it was the root, unless a rename came before that read
        return None if any(r is None and c <= read_ns for c, _, r in names) else comm
    return None
