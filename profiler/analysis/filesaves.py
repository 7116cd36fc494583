"""Saves seen at the file level: the recording's `file_activity` events (record/fileactivity.py,
fanotify) split into saves, and joined with the framework call where the patch or a marker knows it.

A checkpoint is the set of files the recorded tree created or wrote under one entry of the
recorded path (the checkpoint root, `--path`), whoever wrote them (forked writers, spawned tools,
native threads). The rule (docs/analysis.md, "Saves from file activity"):

- the first component of the file's path under the root that names a step (`step_100/`,
  `checkpoint-500/`, `iter_0000010/`, `ckpt-00003.pt`, `epoch=0-step=50.ckpt`, `100/`) names its
  save: with its folder, one checkpoint per step (`model_step_10.pt` and `optim_step_10.pt` are
  one); a root above the checkpoints' folder (the mount, the working directory) does not matter;
- without a step: the first path component under the root, a directory there being one
  checkpoint with everything under it, and files directly in the root one stream;
- within one key, a quiet gap of SAVE_GAP_S or more between the end of one file's burst and the
  start of the next starts a new save (a loop overwriting `latest.pt` every few seconds); under a
  step's name only when the burst writes a file (or folder) of the save again: a step is saved
  once, however long it is quiet between its files (Megatron's first async save: common.pt, 5.6 s
  of planning and forking, the writers' .distcp files, 3.1 s, the finalization's .metadata);
- a directory renamed after its files were written (HF's `tmp-checkpoint-N` → `checkpoint-N`)
  gives its files their final paths first, and a rename joins the save of its key however long
  after (the fsyncs before a publishing rename make no file event);
- a folder made and removed within one of the reader's bursts (retention removing it under a
  second after its save) counts only its making: its removal does not stretch the save;
- deletions alone (retention removing an old checkpoint), and renames alone, are no save; nor is a
  file made and removed within one burst (a write test, a lock, a scratch file): it left no file;
  nor a close for writing alone (nothing created, written or renamed: a FIFO a shell echoed
  into), which only joins a save already open under its key.

The window runs from the first file (or directory) creation or first write to the last write,
close or rename of its files, as the kernel reported them (each stamped when ckprof read it:
within the reader's wake-up at the start, up to its merge pause, 20 ms, late at the end; a creation
at the file's birth time, the file system's coarse-clock stamp: up to a tick early, meta.json
`file_activity.birth_time_tick_ns`). Its bytes
are the files' sizes after the save, each file once; a file several processes wrote counts to none
of them alone (`bytes_shared`).

Joined with marker windows (ckprof.checkpoint, the patch, the workload): a file save and a marker
window are one checkpoint when their times overlap (within JOIN_SLACK_S) and the marker's path is
the save's directory or file, lies inside it, or holds it, or is the folder beside the save's that
names the same step (a save written aside, `.partial-global_epoch1_step1-…`, and published by a
rename this host did not see: another host's), or the marker names no path and the
file save lies inside its time or the marker's process wrote the save's files while the call ran
(a forked writer's torch.save per tensor into its open .distcp stream; a save stamped as over
before such a call began is not its) — but not a save whose files were all written and closed
before the call began (each burst begun more than JOIN_SLACK_S before the call, the last
ended within JOIN_SLACK_S after the call's start: the reader stamps a close late). A save of the
call's step seen only after the call returned, nothing created in sight and first seen within
grouping's JOIN_GAP_S of its end, is the call's too (its folder was made outside the recorded tree,
another host's rank 0, and watched late: the files' later events are stamped when read); it keeps
the call's end. The checkpoint keeps the
call's id, step, blocking time and path, spans both (the call's start to the later of its return
and the last file write); its bytes are those the program stated for a save it marked itself
(ckprof.checkpoint(bytes=), the workload), else the files' when every size is known, else the
call's. It starts at the save's first file instead when that came more than JOIN_SLACK_S before the
call; a folder made empty before the call does not count (the call's preparation).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from .grouping import JOIN_GAP_S, STEP_IN_NAME, merge_parts, step_in_path
from .model import Writer
from .model_base import ABSENT
from .records import ProcessSeen, SavedFile, Window, events_of

SAVE_GAP_S = 1.0  # a quiet gap this long within one key starts a new save
JOIN_SLACK_S = 0.05  # a marker window and a file save this close in time may be one checkpoint
_WRITES = {"create", "modify", "close_write", "rename"}


@dataclass(frozen=True, slots=True)
class ActivitySource:
    """The recording's `file_activity_source` event: what ran (`fanotify`, or `none: why`) and the
    paths it watched."""

    source: str
    paths: list[str]


def source_of(rec) -> ActivitySource | None:
    """The recording's `file_activity_source` event (what ran, or why none), or None (older recordings)."""
    ev = rec.events
    if ev.empty or "event" not in ev:
        return None
    rows = events_of(ev, "file_activity_source")
    if rows.empty:
        return None
    r = rows.iloc[0]
    paths = r.get("paths")
    return ActivitySource(str(r.get("file_activity_source")), list(paths) if isinstance(paths, list) else [])


@dataclass(slots=True)
class Burst:
    """One file's burst of activity, as record/fileactivity.py writes it (an entry of a
    `file_activity` event); `path` follows a directory renamed after it (_apply_dir_renames)."""

    path: str
    start_ns: float
    end_ns: float
    ops: list[str]
    dir: bool
    writers: list[int]
    size_bytes: float | None
    size_unknown: object
    renamed_from: str | None

    @classmethod
    def from_entry(cls, f: dict) -> Burst:
        """One entry of a `file_activity` event's `files`."""
        get = f.get
        size = get("size_bytes")
        return cls(
            path=str(get("path")),
            start_ns=float(f["start_ns"]),
            end_ns=float(f["end_ns"]),
            ops=list(get("ops") or ()),
            dir=bool(get("dir", False)),
            writers=[int(p) for p in get("writers") or ()],
            size_bytes=None if size is None else float(size),
            size_unknown=get("size_unknown"),
            renamed_from=get("renamed_from"),
        )


def bursts_of(rec) -> tuple[list[Burst], dict[int, ProcessSeen]]:
    """(the file_activity bursts, {pid: its file_activity_process event})."""
    ev = rec.events
    if ev.empty or "event" not in ev:
        return [], {}
    procs = {}
    for r in events_of(ev, "file_activity_process").to_dict("records"):
        p = ProcessSeen.from_event(r)
        procs[p.pid] = p
    out: list[Burst] = []
    if "files" not in ev:  # no file_activity event: no file was written under the recorded paths
        return out, procs
    for files in events_of(ev, "file_activity")["files"]:
        out += [Burst.from_entry(f) for f in (files if isinstance(files, list) else ())]
    return out, procs


def _apply_dir_renames(bursts: list[Burst]) -> None:
    """Files written under a directory that was renamed later take their final path."""
    renames = sorted((b for b in bursts if b.dir and b.renamed_from and "rename" in b.ops), key=lambda b: b.end_ns)
    for rn in renames:
        old = rn.renamed_from + os.sep
        for b in bursts:
            if b is rn or b.end_ns > rn.end_ns:
                continue
            if b.path == rn.renamed_from:
                b.path = rn.path
            elif b.path.startswith(old):
                b.path = rn.path + os.sep + b.path[len(old) :]


def _step_of(component: str) -> int | None:
    """The step a path component names (`checkpoint-500`, `iter_0000010`, `ckpt-00003.pt`, `100`)."""
    if component.isdigit():
        return int(component)
    m = list(STEP_IN_NAME.finditer(component))
    return int(m[-1].group(1)) if m else None


def _below(path: str, top: str) -> list[str]:
    """The components of `path` below `top`, as os.path.relpath(path, top).split(os.sep) gives them,
    without its two abspath calls where `top` is a prefix of the path (they were half of the analysis
    of a flood of new files: a burst each)."""
    prefix = top.rstrip(os.sep) + os.sep
    if not path.startswith(prefix):
        return os.path.relpath(path, top).split(os.sep)
    return [c for c in path[len(prefix) :].split(os.sep) if c and c != "."] or ["."]


def _key(path: str, roots: list[str], is_dir: bool = False) -> tuple | None:
    """What names the save a file belongs to under the deepest root holding it (module docstring),
    or None (not under a root)."""
    root = max((r for r in roots if path == r or path.startswith(r.rstrip(os.sep) + os.sep)), key=len, default=None)
    if root is None or path == root:
        return None
    rel = _below(path, root)
    for k, part in enumerate(rel):
        step = _step_of(part)
        if step is not None:  # the first component from the top that names a step
            return ("step", os.path.join(root, *rel[:k]), step)
    if len(rel) == 1 and not is_dir:
        return ("root", root)
    return ("dir", os.path.join(root, rel[0]))


def file_saves(rec) -> list[Window]:
    """The saves the recording's file activity shows (windows of source `files`), by start."""
    src = source_of(rec)
    if src is None or src.source != "fanotify":
        return []
    bursts, procs = bursts_of(rec)
    _apply_dir_renames(bursts)
    for b in bursts:
        if b.dir and {"create", "delete"} <= set(b.ops):
            # a folder made and removed within one burst (the reader ends a folder's burst after
            # QUIET_S: HF's save_total_limit removes checkpoint-2 0.8 s after making it): the save
            # made it; its removal is a later save's retention, so it does not stretch this one
            b.end_ns = b.start_ns
    roots = [os.path.normpath(p) for p in src.paths]
    groups: list[tuple[tuple, list[Burst]]] = []
    # per group, kept as bursts join (a flood's save has thousands: searching its bursts for each
    # new one was quadratic): its latest end, and the paths it holds
    last_end_ns: list[float] = []
    paths_in: list[set[str]] = []
    open_by_key: dict = {}
    for b in sorted(bursts, key=lambda b: b.start_ns):
        if not _WRITES & set(b.ops):
            continue  # deletions alone are no save
        if {"create", "delete"} <= set(b.ops) and not b.dir:
            continue  # made and removed in one burst (a write test, a lock, a scratch file): left no file
        key = _key(b.path, roots, b.dir)
        if key is None:
            continue
        g = open_by_key.get(key)
        renamed_only = not {"create", "modify", "close_write"} & set(b.ops)
        # opened for writing and closed, nothing created, written or renamed (a FIFO a shell echoed
        # into: pipe writes make no FAN_MODIFY; a file reopened to fsync it): part of an open save only
        closed_only = not {"create", "modify", "rename"} & set(b.ops)
        if g is not None and (
            renamed_only
            or b.start_ns <= last_end_ns[g] + SAVE_GAP_S * 1e9
            or (key[0] == "step" and b.path not in paths_in[g])
        ):
            groups[g][1].append(b)  # a rename publishes what the save wrote, however long its fsyncs took
            last_end_ns[g] = max(last_end_ns[g], b.end_ns)
            paths_in[g].add(b.path)
            continue
        if renamed_only or closed_only:
            continue  # a rename alone (a rotation), or a close alone, is no save
        open_by_key[key] = len(groups)
        groups.append((key, [b]))
        last_end_ns.append(b.end_ns)
        paths_in.append({b.path})
    # directories made and nothing written in them (the run's output folder at start-up) are no save
    groups = [(key, bs) for key, bs in groups if not all(b.dir for b in bs)]
    return [_save(n, key, bs, procs) for n, (key, bs) in enumerate(groups, 1)]


def sizes_unknown(files: list[SavedFile] | None) -> str | None:
    """Why a file save's bytes are unknown: how many of its files had no size, and each reason the
    recorder gave (record/fileactivity.py: deleted; gone when its burst ended; not read in a flood),
    the commonest first; None where every size is known (or no file was seen)."""
    if not files:
        return None
    why: dict[str, int] = {}
    for f in files:
        if f.bytes is None:
            reason = str(f.size_unknown) if f.size_unknown else "not recorded"
            why[reason] = why.get(reason, 0) + 1
    if not why:
        return None
    said = "; ".join(f"{n} {reason}" for reason, n in sorted(why.items(), key=lambda kv: -kv[1]))
    return f"{sum(why.values())} of {len(files)} file(s) with no size: {said}"


def _writer(pid: int, procs: dict[int, ProcessSeen], files: int, nbytes: float | None) -> Writer:
    """A writer of a save: what its file_activity_process event said (ppid and cmdline absent where
    the process was not seen starting), the files it wrote and the bytes it alone wrote."""
    p = procs.get(pid)
    if p is None:
        return Writer(pid=pid, comm=None, files=files, bytes=nbytes)
    return Writer(
        pid=pid,
        ppid=p.ppid,
        comm=p.comm,
        cmdline=p.cmdline,
        why_unknown=p.why_unknown if p.why_unknown else ABSENT,
        comm_from=p.comm_from if p.comm_from else ABSENT,
        files=files,
        bytes=nbytes,
    )


def _save(n: int, key: tuple, bursts: list[Burst], procs: dict[int, ProcessSeen]) -> Window:
    files: dict[str, SavedFile] = {}  # the latest burst of each file: its size after the save
    who_wrote: dict[str, set[int]] = {}
    # by end; at the same stamp a rename after the writes it publishes: a file made, written, closed
    # and renamed within one merge pause gives two entries stamped alike, and the rename's entry
    # (written when its burst goes quiet, in a later line whose time is that earlier stamp) is read
    # back first (tests/test_file_saves.py)
    for b in sorted(bursts, key=lambda b: (b.end_ns, b.renamed_from is not None)):
        if b.dir:
            continue
        moved = files.pop(b.renamed_from, None) if b.renamed_from else None
        if moved is not None:  # written under a temporary name, then renamed: one file, its final name
            files[b.path] = replace(moved, path=b.path)
            who_wrote[b.path] = who_wrote.pop(str(b.renamed_from))
        f = files.setdefault(b.path, SavedFile(path=b.path, start_ns=b.start_ns))
        who_wrote.setdefault(b.path, set()).update(b.writers)
        f.end_ns = b.end_ns
        f.bytes = 0.0 if "delete" in b.ops else b.size_bytes
        f.size_unknown = b.size_unknown
    sizes = [f.bytes for f in files.values()]
    tally: dict[int, list] = {}  # pid → [files, bytes it alone wrote (None: a size unknown)]
    shared = 0.0
    for f in files.values():
        who = sorted(who_wrote[f.path])
        f.writers = who
        for pid in who:
            t = tally.setdefault(pid, [0, 0.0])
            t[0] += 1
            if len(who) == 1:  # a file several processes wrote counts to none of them alone
                t[1] = None if t[1] is None or f.bytes is None else t[1] + f.bytes
        if len(who) > 1 and f.bytes is not None:
            shared += f.bytes
    for b in bursts:  # a directory's creator is a writer of the save too
        for pid in b.writers:
            tally.setdefault(pid, [0, 0.0])
    if key[0] == "step":  # the step's folder, or its file; a step's several files: their folder
        names = {os.path.join(key[1], _below(b.path, key[1])[0]) for b in bursts}
        path = names.pop() if len(names) == 1 else key[1]
    else:
        path = key[1]
        if key[0] == "root" and len(files) == 1:
            path = next(iter(files))
    pids = sorted(tally)
    start, end = min(b.start_ns for b in bursts), max(b.end_ns for b in bursts)
    return Window(
        id=f"files:{n}",
        source="files",
        kind="save",
        start_ns=start,
        app_end_ns=end,
        bytes_app=None if (not sizes or any(s is None for s in sizes)) else float(sum(s or 0.0 for s in sizes)),
        path=path,
        step=key[2] if key[0] == "step" else step_in_path(path),
        pid=pids[0] if len(pids) == 1 else None,
        files=sorted(files.values(), key=lambda f: f.path),
        writers=[_writer(p, procs, *tally[p]) for p in pids],
        bytes_shared=shared,
        file_window=(start, end),
        # a folder of its own (a step's, or one created in this save) is one save whatever calls
        # wrote it; else the files are a stream a program's calls may tell apart (join)
        own_folder=key[0] == "step" or (key[0] == "dir" and any(b.dir and b.path == key[1] for b in bursts)),
        file_group=(n, key, bursts, procs),
    )


def _split_stream(s: Window, ms: list[Window]) -> list[Window]:
    """A stream's file save that several calls wrote (a loop saving `latest.pt`): each burst goes to
    the latest call that started before it (within JOIN_SLACK_S) and names its file or folder,
    else the latest that started before it; one file save per call."""
    assert s.file_group is not None
    n, key, bursts, procs = s.file_group
    slack = JOIN_SLACK_S * 1e9
    by_call: dict[int, list[Burst]] = {}
    for b in bursts:
        started = [k for k, m in enumerate(ms) if m.start_ns - slack <= b.start_ns] or [0]
        named = [k for k in started if _names(ms[k], b.path)]
        by_call.setdefault(max(named or started, key=lambda k: ms[k].start_ns), []).append(b)
    # each piece is its call's: it joins that call alone (a marked window holding the stream's
    # folder would otherwise take the next call's piece too, when the two are within JOIN_SLACK_S)
    return [
        replace(_save(n, key, bs, procs), id=f"files:{n}.{k + 1}", call_id=ms[k].id)
        for k, bs in sorted(by_call.items())
    ]


def _names(m: Window, path: str) -> bool:
    if not m.path:
        return False
    mp = os.path.normpath(os.path.abspath(m.path))
    return path == mp or path.startswith(mp + os.sep)


def _bursts(s: Window) -> list[Burst]:
    return s.file_group[2] if s.file_group else []


def _seen_late(m: Window, s: Window) -> bool:
    """The call's own files, seen only after it returned: a save of the call's step (a step is saved
    once) with no file or folder created in sight, first seen within grouping's JOIN_GAP_S of the
    call's end. Its folder was made by a process outside the recorded tree (another host's rank 0,
    or another recorded tree on this machine) and watched only once its creation was read, after
    the tree's ranks had made their files; their later events are stamped when read."""
    if m.kind != "save" or m.step is None or s.step != m.step or m.app_end_ns is None:
        return False
    after_s = (s.start_ns - m.app_end_ns) / 1e9
    return JOIN_SLACK_S < after_s <= JOIN_GAP_S and all("create" not in b.ops for b in _bursts(s))


def _related(m: Window, s: Window) -> bool:
    """A marker window and a file save are one checkpoint (module docstring)."""
    slack = JOIN_SLACK_S * 1e9
    m_end = m.app_end_ns if m.app_end_ns is not None else float("inf")
    s_end = s.app_end_ns if s.app_end_ns is not None else float("inf")
    if m.kind != "save" or m.start_ns > s_end + slack or (s.start_ns > m_end + slack and not _seen_late(m, s)):
        return False
    if s_end <= m.start_ns + slack and all(b.start_ns < m.start_ns - slack for b in _bursts(s)):
        # every burst began before the call and the last ended by its start (a close is stamped up to
        # the reader's merge pause late): the program's own file, not the call's (a data file written
        # just before a save); a small file the call made itself begins after the call's start
        return False
    if not m.path:
        # a call naming no path holds the file save, or was made by a process that wrote its files
        # while the call ran (a forked writer's torch.save per tensor into its open stream): a burst
        # of that process's that had not ended when the call began — stamps are late, never early,
        # so a burst stamped as ended before is over — and began by its return. Not merely a file
        # the process wrote at some other time: one process (Lightning's, its checkpoint thread's
        # torch.save to a temporary file) writes every save's files. Nor a save already over when
        # the call began (its last stamp before the call's start: it was over earlier still)
        if s_end < m.start_ns:
            return False
        return (m.start_ns - slack <= s.start_ns and s_end <= m_end + slack) or (
            m.pid is not None
            and any(m.pid in b.writers and b.end_ns >= m.start_ns and b.start_ns <= m_end + slack for b in _bursts(s))
        )
    mp = os.path.normpath(os.path.abspath(m.path))
    sp = os.path.normpath(str(s.path))
    if mp == sp or mp.startswith(sp + os.sep) or sp.startswith(mp + os.sep):
        return True
    key = s.file_group[1] if s.file_group else None
    if key and key[0] == "step" and os.path.dirname(mp) == key[1] and _step_of(os.path.basename(mp)) == key[2]:
        # the save was written aside under a name of the same step beside the call's folder
        # (`.partial-global_epoch1_step1-…` for `global_epoch1_step1`) and published by a rename
        # this host did not see: another host's rank 0 made it (or this reader read the files'
        # events before it). The host's files are still the call's save, not a second checkpoint.
        return True
    return any(f.path == mp or f.path.startswith(mp + os.sep) for f in s.files or ())


def join(marked: list[Window], saves: list[Window]) -> list[Window]:
    """Marker checkpoints and file saves → checkpoints: related ones (module docstring) become one,
    whatever many of each — except that a stream's file save several calls wrote is split among
    them first (_split_stream); the rest stay as they are. Ordered by start."""
    split = []
    for s in saves:
        ms = [m for m in marked if _related(m, s)]
        split.extend(_split_stream(s, ms) if len(ms) > 1 and not s.own_folder else [s])
    saves = split
    parent = list(range(len(marked) + len(saves)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, m in enumerate(marked):
        for j, s in enumerate(saves):
            if _related(m, s) and s.call_id in (None, m.id):
                parent[find(i)] = find(len(marked) + j)
    comps: dict[int, tuple[list, list]] = {}
    for i in range(len(marked) + len(saves)):
        ms, ss = comps.setdefault(find(i), ([], []))
        (ms.append(marked[i]) if i < len(marked) else ss.append(saves[i - len(marked)]))
    out = [_one(ms, ss) for ms, ss in comps.values()]
    return sorted(out, key=lambda w: w.start_ns)


def _one(ms: list[Window], ss: list[Window]) -> Window:
    if not ss:
        return ms[0] if len(ms) == 1 else _merged_markers(ms)
    s = ss[0] if len(ss) == 1 else _merged_saves(ss)
    if not ms:
        return s
    m = ms[0] if len(ms) == 1 else _merged_markers(ms)
    # files seen only after the call returned keep the call's end: their stamps are when they were read
    ends = [m.app_end_ns] if _seen_late(m, s) else [m.app_end_ns, s.app_end_ns]
    # the call's start, unless its files began well before it (a forked writer's torch.save in a
    # folder its parent made earlier); what comes just before a call is its own preparation, and so
    # is a folder made with no file in it before the call (Megatron's iter_N/, then a barrier)
    first_file = min((f.start_ns for f in s.files or ()), default=s.start_ns)
    lead = m.start_ns - first_file
    out = replace(
        m,
        start_ns=s.start_ns if lead > JOIN_SLACK_S * 1e9 else m.start_ns,
        app_end_ns=None if m.app_end_ns is None and m.ok is not False else max(e for e in ends if e is not None),
        # the bytes a program stated for the save it marked (ckprof.checkpoint(bytes=), the workload's
        # shards) are its save's; else the files' sizes (the patch's calls, or no bytes stated)
        bytes_app=m.bytes_app
        if m.source != "patch" and m.bytes_app is not None
        else s.bytes_app
        if s.bytes_app is not None
        else m.bytes_app,
        files=s.files,
        writers=s.writers,
        bytes_shared=s.bytes_shared,
        file_window=s.file_window,
        seen_by=sorted({"files", str(m.source)}),
    )
    # a save's own folder, not the one file of it a call named (common.pt); a patched call naming no
    # path (a forked writer's torch.save into an open stream) takes the files' — a window the program
    # marked itself keeps the path it gave, or none (its nested calls name the files)
    if (not m.path and m.source == "patch") or (s.own_folder and _names_a_part(m, s)):
        out.path = s.path
    if out.step is None:
        out.step = s.step
    return out


def _names_a_part(m: Window, s: Window) -> bool:
    """The call named a file or folder inside the save's folder, and the save wrote files beyond it
    (Megatron's torch.save of common.pt among the writers' .distcp files; a folder made for one
    file keeps the file's path)."""
    if not m.path:
        return False
    mp = os.path.normpath(os.path.abspath(m.path))
    if not mp.startswith(str(s.path) + os.sep):
        return False
    return any(f.path != mp and not f.path.startswith(mp + os.sep) for f in s.files or ())


def _merged_markers(ms: list[Window]) -> Window:
    """Several marker checkpoints of one save (a forked writer's torch.save per tensor): one, by
    grouping's own merge of their parts."""
    return merge_parts([p for m in ms for p in (m.parts or [m])])


def _merged_saves(ss: list[Window]) -> Window:
    """File saves under one marker's call (its files in the root and in a folder): one."""
    files = [f for s in ss for f in s.files or ()]
    writers: dict[int, Writer] = {}
    for s in ss:
        for w in s.writers or ():
            cur = writers.get(w.pid)
            if cur is None:
                writers[w.pid] = w
            else:
                both = None if cur.bytes is None or w.bytes is None else cur.bytes + w.bytes
                writers[w.pid] = replace(cur, files=cur.files + w.files, bytes=both)
    known = [s.bytes_app for s in ss]
    start = min(s.start_ns for s in ss)
    end = max(s.app_end_ns or 0.0 for s in ss)  # a file save always ends: its last file event
    return replace(
        ss[0],
        start_ns=start,
        app_end_ns=end,
        bytes_app=None if any(b is None for b in known) else float(sum(b or 0.0 for b in known)),
        path=os.path.commonpath([str(s.path) for s in ss]),
        files=files,
        writers=[writers[p] for p in sorted(writers)],
        bytes_shared=sum(s.bytes_shared or 0.0 for s in ss),
        file_window=(start, end),
    )
