"""The proc connector's forks and execs on two sockets (record/proctree_events.py, Linux 6.6's
per-socket filter): the socket the file-activity reader waits on in its merge pauses carries only
execs and comms, so the machine's other forks no longer wake it; membership and the names of
short-lived writers are what they were. Real processes, the real connector (root).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ckprof.record import proctree_events as P

pytestmark = pytest.mark.root


@pytest.fixture
def tree():
    if os.geteuid() != 0:
        pytest.skip("the proc connector needs root (CAP_NET_ADMIN)")
    if not P._filters_per_socket():
        pytest.skip(f"Linux {os.uname().release} sends every event to every listener (filters: 6.6)")
    t = P.ProcTree()
    if t.sock is None:
        pytest.skip(t.basis)
    yield t
    t.close()


def _kinds(sock) -> set[int]:
    out = set()
    while True:
        try:
            buf = sock.recv(1 << 16)
        except BlockingIOError:
            return out
        out.add(P._EVENT.unpack_from(buf, P._NLMSG.size + P._CN_MSG.size)[0])


def test_the_socket_waited_on_carries_no_forks(tree):
    # a process outside the tree forks 50 children that exit at once, then one exec
    code = "import os\nfor _ in range(50):\n    pid = os.fork()\n    if pid == 0: os._exit(0)\n    os.waitpid(pid, 0)\n"
    subprocess.run([sys.executable, "-c", code], check=True)
    time.sleep(0.1)
    waited = next(s for s in (tree.sock, tree.exec_sock) if s is not None and s.fileno() == tree.fileno())
    kinds = _kinds(waited)
    assert P.PROC_EVENT_EXEC in kinds  # the exec of python itself (and whatever else ran meanwhile)
    assert P.PROC_EVENT_FORK not in kinds, kinds
    assert _kinds(tree.sock) == {P.PROC_EVENT_FORK}


WRITER = r"""
import os, sys, time
sys.stdin.readline()
pid = os.fork()
if pid == 0:
    os.execvp("sh", ["sh", "-c", "sleep 0.5"])
os.waitpid(pid, 0)
"""


def test_membership_and_a_childs_exec_are_still_seen(tree):
    p = subprocess.Popen([sys.executable, "-c", WRITER], stdin=subprocess.PIPE, text=True)
    tree.set_root(p.pid)
    p.stdin.write("go\n")
    p.stdin.close()
    deadline = time.monotonic() + 10
    kids = set()
    while time.monotonic() < deadline and not (kids and any(tree.execs.get(k) for k in kids)):
        time.sleep(0.05)
        tree.drain()
        kids = {c for c, parent in tree.parents.items() if parent == p.pid}
    p.wait(timeout=10)
    assert len(kids) == 1
    (kid,) = kids
    assert tree.contains(kid)
    assert tree.execs[kid]["comm"] in ("sh", "sleep"), tree.execs[kid]


def _tree(**kw):
    from types import SimpleNamespace

    base = dict(names={}, forked_ns={}, parents={}, root=1, root_comm=(100, "train"))
    return SimpleNamespace(**{**base, **kw})


def test_comm_at_is_the_name_when_it_was_asked_never_a_later_one():
    """proctree_events.comm_at, rule by rule (kernel times in ns): a rename names itself; an exec's
    name, read from /proc afterwards, counts only where no rename came between; a process with no
    rename or exec before the time has what its fork copied; the root has its name read at
    set_root, unless it had renamed itself before that read; else unknown (None)."""
    t = _tree(
        # the root renamed itself at 500; its child 2 (forked at 300) exec'd at 600 and its comm was
        # read at 650; child 3 (forked at 700) exec'd at 800, renamed itself at 850, its exec's comm
        # read at 900 (so that read saw the rename)
        names={1: [(500, "train2", None)], 2: [(600, "worker", 650)], 3: [(800, "w3", 900), (850, "w3b", None)]},
        forked_ns={2: 300, 3: 700, 4: 400, 5: 620},
        parents={2: 1, 3: 1, 4: 2, 5: 2},
    )
    assert P.comm_at(t, 1, 200) == "train"  # read at set_root (100), no rename before 500
    assert P.comm_at(t, 1, 550) == "train2"  # the rename's own name
    assert P.comm_at(t, 2, 400) == "train"  # before its exec: what its fork (300) copied
    assert P.comm_at(t, 4, 450) == "train"  # a grandchild: what its fork (400) copied from 2
    assert P.comm_at(t, 2, 610) == "worker"  # the exec's comm, read before any rename
    assert P.comm_at(t, 5, 700) == "worker"  # forked after that exec
    assert P.comm_at(t, 3, 820) is None  # exec'd at 800 but read at 900, after the rename at 850
    assert P.comm_at(t, 3, 860) == "w3b"
    assert P.comm_at(_tree(names={1: [(50, "early", None)]}), 1, 40) is None  # renamed before the read
    assert P.comm_at(_tree(root_comm=None), 1, 40) is None
    assert P.comm_at(_tree(), 9, 40) is None  # not forked in the tree: nothing known


def test_a_pid_forked_again_in_the_tree_forgets_the_old_process_s_names():
    """A member's pid, reused by a new fork in the tree: what the old process exec'd and renamed
    itself to is not the new one's (it would name a writer gone before /proc is read wrongly)."""
    t = P.ProcTree.__new__(P.ProcTree)  # no sockets: only the bookkeeping is under test
    t.root, t.members, t._pending, t.on_leave = 1, {1, 7}, [], None
    t.parents, t.forked_ns = {7: 1}, {7: 100}
    t.names, t.comms, t.execs = {7: [(150, "old", None)]}, {7: "old"}, {7: {"pid": 7, "comm": "old"}}
    t._fork(1, 7, 900)
    assert t.forked_ns[7] == 900 and 7 not in t.names and 7 not in t.comms and 7 not in t.execs
    t.root_comm = (50, "train")
    assert P.comm_at(t, 7, 950) == "train"  # what its fork copied from the root
