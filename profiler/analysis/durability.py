"""A checkpoint's durable end, from its own files' pages and what is behind them — never from the
devices' totals.

The recorder's file tracker (ckprof.record.filetracker) asks cachestat(2) about each file a save
named, or the recorded tree was seen writing (file activity: a save no call named, written by a
forked process or native threads), until none of its pages is dirty or under writeback, and writes one event per file, with the
statfs(2) f_type of the file system behind it (`fs_magic`, ckprof.record.fskind). What "no dirty
page" means depends on that file system, so the verdict is one rule over both (`durable_end`):

- block-device file systems (ext4, xfs, btrfs, ...): durable **on the device**; durable end = the
  latest of its files' `file_durable` times (the end of the window when every page was clean by
  then); `durable: true` only when every file has such an event;
- network file systems (NFS, 9p, CIFS/SMB, Lustre, Ceph, ...): the same rule, durable **on the
  server** (the client holds no dirty or writeback page), never "on the device";
- tmpfs, ramfs, hugetlbfs (and shm, devtmpfs): never durable, `durable: false`: "no storage behind
  tmpfs" (their pages are clean because they are never written anywhere);
- FUSE, overlayfs, ecryptfs, a file system type not in the table: `durable: null`: cachestat sees
  the upper inode, clean while the file system below may hold the data dirty;
- an object store (the checkpoint's path is s3://, gs://, az://, ...): durable **in the object
  store** once an event of its window says the upload's completing call returned without error
  (`uploaded: true`), else unknown;
- a recording made before the tracker recorded `fs_magic`: judged as a block device's, and said so.

Within the rule, as before: any file unlinked with pages still dirty (`file_deleted_before_durable`,
or gone before the tracker's first look after the save left pages dirty) → `durable: false`,
"deleted before durable"; no file-level evidence for some file (no path, cachestat unavailable,
the file could not be opened, the recording ended first) → `durable: null`, with the reason.

`durable_at_return` is judged at the END OF THE WINDOW: after the app's own fsync, fdatasync,
rename or sync of the save's files that the patch tied to it (`checkpoint_extend`,
windows.py's `app_end_ns`). A file is clean then when its pages were clean as the save call
returned, or the app fsync'd/fdatasync'd it (or called sync) inside the window (fsync(2): its data
was handed to the device when the call returned), or the tracker saw it clean by then.

The devices' write totals and the host's Dirty+Writeback (/proc/meminfo, machine-wide) appear only
as a hint in `durable_basis`, labelled as such (windows.durable_end_hint).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ckprof.recording.format import FILE_ACTIVITY_ID
from ckprof.recording.fstypes import OBJECT_SCHEMES, kind_of, url_scheme

from .records import (
    CheckpointEnd,
    CheckpointExtend,
    FileEvent,
    TrackerRun,
    Window,
    checkpoint_ends,
    checkpoint_extends,
    events_of,
)
from .windows import DurableHint

FILE_EVENTS = (
    "file_durable",
    "file_deleted_before_durable",
    "file_gone_before_poll",
    "file_pending_at_end",
    "file_untracked",
)
MIB = 1024 * 1024


@dataclass
class FileEvidence:
    """The recording's file events, by checkpoint id, and whether the tracker ran."""

    tracker: TrackerRun | None = None  # the file_tracker event (ok, reason)
    by_id: dict[str, list[FileEvent]] = field(default_factory=dict)
    ends: dict[str, CheckpointEnd] = field(default_factory=dict)  # checkpoint id → its checkpoint_end event
    # checkpoint id → paths the app renamed away (checkpoint_extend)
    renamed: dict[str, set[str]] = field(default_factory=dict)
    # checkpoint id → its checkpoint_extend events (the app's finishing)
    extends: dict[str, list[CheckpointExtend]] = field(default_factory=dict)
    _written_by_path: dict[str, list[FileEvent]] | None = field(default=None, repr=False, compare=False)

    def written_by_path(self) -> dict[str, list[FileEvent]]:
        """The events of the files only the file activity named (FILE_ACTIVITY_ID), by path, in the
        recording's order; built once (a flood's save has thousands of files, the recording tens of
        thousands of such events: searching them all for each file was minutes of analysis)."""
        if self._written_by_path is None:
            self._written_by_path = {}
            for e in self.by_id.get(FILE_ACTIVITY_ID, []):
                if e.path:
                    self._written_by_path.setdefault(e.path, []).append(e)
        return self._written_by_path

    @classmethod
    def of(cls, rec) -> FileEvidence:
        ev = rec.events
        out = cls()
        if ev.empty or "event" not in ev:
            return out
        tr = events_of(ev, "file_tracker")
        if len(tr):
            out.tracker = TrackerRun.from_event(tr.iloc[-1])
        for r in events_of(ev, *FILE_EVENTS).to_dict("records"):
            f = FileEvent.from_event(r)
            out.by_id.setdefault(f.id, []).append(f)
        for end in checkpoint_ends(ev):
            out.ends[end.id] = end
        for e in checkpoint_extends(ev):
            out.extends.setdefault(e.id, []).append(e)
            if e.renamed_to:
                out.renamed.setdefault(e.id, set()).add(str(e.path))
        return out


def _mib(n) -> str:
    n = n or 0
    return f"{n / MIB:.2f} MiB" if n >= MIB else f"{n / 1024:.1f} KiB"


# where a durable checkpoint's bytes are, by the kind of storage behind its files (recording/fstypes.py)
WHERE = {"block": "device", "network": "server", "object": "object store"}
FLUSHING_OPS = {"fsync", "fdatasync"}  # a file's own: its data on the device (or server) as the call returned


@dataclass
class Storage:
    """What is behind a checkpoint's files: `kind` block | network | memory | fuse | stacked |
    object | unrecognised, or None (the recording does not say: made before fs_magic was recorded)."""

    kind: str | None
    file_system: str | None = None


def storage_of(path: str | None, files: list[FileEvent]) -> Storage:
    """The kind of storage behind the checkpoint at `path`: its scheme, else its files' f_type. Files
    on several kinds take the one that says least (memory, then unknown below, then network)."""
    scheme = url_scheme(path)
    if scheme is not None:
        return Storage("object" if scheme in OBJECT_SCHEMES else "unrecognised", f"{scheme}://")
    magics = [f.fs_magic for f in files if f.has_fs_magic]
    if not files or len(magics) < len(files) or any(x is None for x in magics):
        return Storage(None)
    kinds = {kind_of(x) for x in magics}  # {(kind, name)}
    names = ", ".join(sorted({name for _, name in kinds}))
    weakest = next(want for want in ("memory", "fuse", "stacked", None, "network", "block") if want in dict(kinds))
    return Storage(weakest or "unrecognised", names)


def flushed_by_app(fe: FileEvidence, ids) -> tuple[bool, set[str]]:
    """(an os.sync inside the window, the paths the app fsync'd/fdatasync'd inside it — under their
    names after a rename that followed)."""
    synced, paths = False, set()
    evs = sorted((e for i in ids for e in fe.extends.get(i, ())), key=lambda e: e.t_ns or 0)
    for e in evs:
        op, path = e.op, e.path
        if op == "sync":
            synced = True
        elif op in FLUSHING_OPS and path:
            paths.add(os.path.normpath(path))
        elif e.renamed_to and path and os.path.normpath(path) in paths:
            paths.add(os.path.normpath(e.renamed_to))
    return synced, paths


def end_of(w: Window, fe: FileEvidence) -> CheckpointEnd:
    """The save's `checkpoint_end` as this rule reads it. A grouped save (its ranks' or files'
    windows, grouping.py) has one per part: the dirty bytes and files at each part's return are
    summed (its files are the parts' files; each part's own look covers its own), null where a part
    has none; uploaded only when every part's upload completed; the last return's time."""
    if not w.parts:
        return fe.ends.get(w.id) or CheckpointEnd()
    ends = [fe.ends.get(p.id) for p in w.parts]
    known = [e for e in ends if e is not None]
    whole = len(known) == len(ends)
    pending = [e.pending_bytes_at_return for e in known]
    files = [e.files_at_return for e in known]
    ups = [e.uploaded for e in known]
    return CheckpointEnd(
        id=w.id,
        t_ns=max((e.t_ns for e in known if e.t_ns is not None), default=None),
        pending_bytes_at_return=float(sum(x for x in pending if x is not None))
        if whole and all(x is not None for x in pending)
        else None,
        files_at_return=sum(x for x in files if x is not None) if whole and all(x is not None for x in files) else None,
        uploaded=False if False in ups else (True if whole and ups and all(u is True for u in ups) else None),
        blocking_s=w.blocking_s,
    )


def _at_window_end(
    w: Window, fe: FileEvidence, ids, files: list[FileEvent], end: CheckpointEnd, basis: list
) -> tuple[bool | None, float | None]:
    """(durable_at_return, pending_bytes_at_return), judged at the end of the window: after the app's
    own fsync/rename/sync of the save's files (windows.py's app_end_ns), not at the save call's return."""
    t_end = w.app_end_ns
    at_ret, n_ret = end.pending_bytes_at_return, end.files_at_return
    have_ret = at_ret is not None and n_ret
    if have_ret and at_ret == 0:
        return True, 0.0  # pages only get dirtier by new writes: clean at the call's return, clean after
    extended = any(fe.extends.get(i) for i in ids)  # the app finished the save after the call returned
    synced, fsynced = flushed_by_app(fe, ids)

    def flushed(f: FileEvent) -> bool:
        return synced or os.path.normpath(str(f.path)) in fsynced

    def seen_clean(f: FileEvent) -> bool:
        return f.event == "file_durable" and t_end is not None and f.t_ns is not None and f.t_ns <= t_end

    left = [f for f in files if not (flushed(f) or seen_clean(f))]
    if files and t_end is not None and not left:
        n = sum(1 for f in files if flushed(f))
        how = "os.sync()" if synced else "fsync/fdatasync"
        basis.append(
            f"at the window's end: the app's own {how} of {n} of its {len(files)} file(s) inside the window "
            "(fsync(2): the data was handed to the storage when the call returned)"
            + ("; the others were seen clean by then (cachestat)" if n < len(files) else "")
            if n
            else "at the window's end: every file seen clean by then (cachestat)"
        )
        return True, 0.0
    if have_ret and not extended:
        return False, float(at_ret or 0.0)  # the look at the call's return is the look at the window's end
    looks = [f.first_poll_pending_bytes for f in left]
    polls = [f.first_poll_ns for f in left]
    after = t_end is not None and all(t is not None and t >= t_end for t in polls)
    if left and all(x is not None for x in looks) and (after or not have_ret):
        # the tracker's first look at the files the app did not flush: pages only get cleaner
        # without new writes, so dirty then means dirty at the end of the window
        first = float(sum(x or 0.0 for x in looks))
        lag = max(t or 0.0 for t in polls) - t_end if t_end is not None else None
        if lag is not None:
            basis.append(f"at the window's end: the tracker's first look, {lag / 1e6:.0f} ms after it")
        return first == 0, first
    if have_ret:
        basis.append(
            f"at the window's end: {len(left)} of its {len(files)} file(s) not fsync'd by the app inside the "
            f"window; {_mib(at_ret)} were dirty when the save call returned"
        )
        return False, float(at_ret or 0.0)
    return None, None


def _object_store(w: Window, fe: FileEvidence, ids, end: CheckpointEnd, out: Verdict) -> Verdict:
    """Durable in the object store once the upload's completing call (the file's close, the
    multipart completion) returned without error: an event of the window says `uploaded: true`."""
    evs: list[CheckpointEnd | CheckpointExtend] = [end, *(e for i in ids for e in fe.extends.get(i, ()))]
    done = [float(e.t_ns or 0.0) for e in evs if e.uploaded is True]
    if w.app_end_ns is None or not done:
        out.durable_basis.insert(
            0, "unknown: an object-store path, and no event says its upload completed (the completing call's return)"
        )
        return out
    t = max(done)
    out.durable, out.durable_at_return = True, t <= w.app_end_ns
    out.durable_end_ns = max(t, float(w.app_end_ns))
    out.durable_where = "object store"
    out.durable_basis.insert(0, "in the object store: the upload's completing call returned without error")
    return out


def _written_files(w: Window, fe: FileEvidence, known: set) -> list[FileEvent]:
    """File events for the files a file-level save wrote (w.files, analysis/filesaves.py) that
    no call of it named: the tracker watched them from their `file_activity` burst (whoever wrote
    them: a forked writer, a native thread). Per file the first event whose first look came after
    the file's burst began (a later one is a later save's)."""
    out = []
    seen, by_path = fe.by_id.get(FILE_ACTIVITY_ID, []), fe.written_by_path()
    for f in w.files or ():
        path = f.path
        if not path or path in known:
            continue
        after = [e for e in by_path.get(path, ()) if (e.first_poll_ns or 0) >= f.start_ns]
        if after:
            out.append(min(after, key=lambda e: e.first_poll_ns or 0))
        elif seen:  # the tracker watched written files, not this one: its pages are not known
            reason = "the file tracker did not look at it (more files written than it watches, or the recording ended)"
            out.append(FileEvent("file_untracked", FILE_ACTIVITY_ID, path, reason=reason))
    return out


def save_files(w: Window, fe: FileEvidence) -> list[FileEvent]:
    """The file events of a save, the verdict's and the audit's (analysis/audit.py): those of its
    ids and of the files it wrote that no call named."""
    # a torch.save / DCP / safetensors save inside `with ckprof.checkpoint():` is part of it: its files too
    ids = (w.id, *w.nested_ids)
    moved = set().union(*(fe.renamed.get(i, set()) for i in ids))
    # a file renamed to its final name did not vanish: the new name is tracked in its place
    # parts of one checkpoint (ranks naming one DCP folder) have the same files watched: each once
    files = list(
        {
            (f.event, f.path): f
            for i in ids
            for f in fe.by_id.get(i, [])
            if not (f.event == "file_gone_before_poll" and f.path in moved)
        }.values()
    )
    return files + _written_files(w, fe, {f.path for f in files})


@dataclass
class Verdict:
    """One window's durability (durable_end): filled as the rule goes, the reason first in
    `durable_basis`; `durable_end_ns` monotonic ns, `pending_bytes_at_return` bytes."""

    durable: bool | None = None
    durable_end_ns: float | None = None
    durable_at_return: bool | None = None
    pending_bytes_at_return: float | None = None
    durable_where: str | None = None
    file_system: str | None = None
    durable_basis: list[str] = field(default_factory=list)


def durable_end(w: Window, fe: FileEvidence, hint: DurableHint | None = None) -> Verdict:
    """The one durability rule (module docstring)."""
    out = Verdict()
    basis = out.durable_basis
    app_end = w.app_end_ns  # the end of the window: after the app's own fsync/rename (windows.py)
    end = end_of(w, fe)
    at_ret, n_ret = end.pending_bytes_at_return, end.files_at_return
    have_ret = at_ret is not None and n_ret
    ids = (w.id, *w.nested_ids)
    files = save_files(w, fe)
    storage = storage_of(w.path, files)
    out.file_system = storage.file_system

    def unknown(reason: str) -> Verdict:
        basis.insert(0, f"unknown: {reason}")
        _hint(out, hint)
        return out

    if storage.kind == "object":
        return _object_store(w, fe, ids, end, out)
    if storage.kind == "unrecognised" and storage.file_system and storage.file_system.endswith("://"):
        return unknown(f"a {storage.file_system} path: ckprof cannot see what is behind it")
    if fe.tracker is None:
        return unknown("recorded without the file tracker (no file-level evidence)")
    if not fe.tracker.ok:
        return unknown(f"file tracker did not run: {fe.tracker.reason}")
    if not w.path and not files:
        return unknown("the checkpoint named no path (ckprof.checkpoint(path=...)), so no file was watched")
    if app_end is None:
        return unknown("the save did not return before the recording ended")
    if not files:
        return unknown("no file of the checkpoint was seen by the tracker (the recording ended first?)")

    if storage.kind == "memory":
        # tmpfs pages are never dirty in cachestat's sense: they are never written anywhere (mm/shmem.c)
        out.durable, out.durable_at_return = False, False
        basis.insert(
            0,
            f"not durable: no storage behind {storage.file_system} (its pages in memory are the only copy; "
            "a reboot, a crash or an unmount loses them)",
        )
        return out  # no device-total hint: the devices wrote none of it
    at_end, pending = _at_window_end(w, fe, ids, files, end, basis)
    known_below = storage.kind in (None, "block", "network")
    if known_below:
        out.durable_at_return, out.pending_bytes_at_return = at_end, pending
    where = WHERE.get(storage.kind, "device")  # None: today's rule, as a block device's
    on = f"on the {where}" if storage.kind != "object" else "in the object store"

    deleted = [f for f in files if f.event == "file_deleted_before_durable"]
    gone = [f for f in files if f.event == "file_gone_before_poll"]
    if gone and have_ret and at_ret is not None and at_ret > 0:  # dirty at return, then gone before anyone saw it clean
        deleted += gone
        gone = []
    if deleted:
        out.durable = False
        out.durable_at_return = False if known_below else None
        basis.insert(
            0,
            "deleted before durable: "
            + "; ".join(
                f"{f.path} ({_mib(f.pending_bytes if f.pending_bytes is not None else at_ret)} not {on})"
                for f in deleted
            ),
        )
        # no device-total hint here: a machine-wide "durable end at …" beside a checkpoint whose
        # files never reached the device read as a contradiction (frameworks tier, retention)
        return out
    if storage.kind == "fuse":
        return unknown(
            "FUSE: the backing file is not visible to ckprof (cachestat of the FUSE file is clean while the "
            "file system below may hold its data dirty)"
        )
    if not known_below:
        return unknown(
            f"{storage.file_system}: the file below it is not visible to ckprof (cachestat sees only the "
            "upper file, clean while the file system below may hold its data dirty)"
            if storage.kind == "stacked"
            else f"{storage.file_system}: a file system ckprof does not know; what is behind it is unknown"
        )
    if storage.kind is None:
        basis.append(
            "the file system behind the files was not recorded (a recording made before ckprof recorded it, "
            "or statfs(2) failed): judged as a block device's"
        )
    clean_at_return = have_ret and at_ret == 0
    reasons = []
    for f in files:
        if f.event == "file_gone_before_poll" and not clean_at_return:
            reasons.append(f"{f.path} removed before the tracker's first look; whether its pages were {on} is unknown")
        elif f.event == "file_pending_at_end":
            reasons.append(
                f"the recording ended with {_mib(f.pending_bytes)} of {f.path} still dirty in the page cache"
            )
        elif f.event == "file_untracked":
            reasons.append(f"{f.path} could not be watched: {f.reason}")
    if reasons:
        return unknown("; ".join(reasons))
    durable = [f for f in files if f.event == "file_durable"]
    if clean_at_return:
        t = float(app_end)
        basis.insert(
            0, f"{on}: every page of its {int(n_ret or 0)} file(s) was clean when the save returned (cachestat)"
        )
    elif at_end is True:
        t = float(app_end)
        basis.insert(0, f"{on}: every page of its {len(files)} file(s) was clean at the end of its window")
    else:
        t = max(float(app_end), max(float(f.t_ns or 0.0) for f in durable))
        basis.insert(
            0,
            f"{on}: all {len(durable)} file(s) had no dirty or writeback page (cachestat); "
            "the last one's is the durable end",
        )
    out.durable = True
    out.durable_end_ns = t
    out.durable_where = WHERE.get(storage.kind)
    _hint(out, hint)
    return out


def _hint(out: Verdict, hint: DurableHint | None) -> None:
    if not hint:
        return
    at = hint.durable_end_ns
    what = "no durable end" if at is None else f"a durable end at {(at - hint.start_ns) / 1e9:.2f} s"
    out.durable_basis.append(
        f"hint only, not the verdict (device totals and host Dirty+Writeback are "
        f"machine-wide): they suggest {what} — " + "; ".join(hint.durable_basis)
    )
