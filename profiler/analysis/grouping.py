"""One checkpoint per save: the windows that one save produced, across files, threads, ranks and
hosts, become one checkpoint whose parts stay visible.

A framework's save writes many files, and every rank writes its own: without grouping, a
Hugging Face save is five windows and a 2-rank DCP save two, each counting the shared directory.
Windows are one checkpoint when they

- are of the same kind (save or load) and the same checkpoint: the same `step` when the markers
  give one, else the same checkpoint directory (the path itself for a directory save — DCP, HF's
  checkpoint-N/ — or the file's folder) and the same step number in its name
  (`checkpoint-500`, `step_100`, `epoch=0-step=50.ckpt`, `global_step7`);
- and belong to one save phase: they overlap, or the next starts within JOIN_GAP_S of the
  group's end (SAME_PROCESS_GAP_S of the end of the same process's last part; loads:
  SAME_PROCESS_LOAD_GAP_S) — except that one process writing a file it already wrote in this group
  with the same call, or marking a second window itself (ckprof.checkpoint), starts a new
  checkpoint (a loop saving `latest.pt` every few hundred ms is many saves). A slow rank's part
  starts with the others and only ends later, so it joins; the same step saved or loaded again
  after the others ended (a second restore of one checkpoint) is a checkpoint of its own.

The checkpoint spans its parts (first start → last return); its application bytes are each file
counted once (a directory that several ranks report is counted once, at the largest size seen;
files inside a directory that a part reports are in it; what marked parts say they wrote adds
up). It failed if any part failed.
Inferred windows are never grouped (they come from the devices, one per burst already).
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

from .records import Window

JOIN_GAP_S = 1.0  # another process's (rank's) part of the save may start this long after the last ended
# one process writes a save's files back to back (ms apart: HF, torch.save of model then
# optimizer); a longer pause between two of its saves is training, so a new checkpoint
SAME_PROCESS_GAP_S = 0.2
# a restore's reads from one process are spread over its start-up (HF loads the model, then the
# optimizer and RNG state as training starts): they join across this much
SAME_PROCESS_LOAD_GAP_S = 30.0
STEP_IN_NAME = re.compile(r"(?:checkpoint|ckpt|step|global_step|iter|iteration)[-_=]?(\d+)", re.IGNORECASE)
# saves whose path is the checkpoint directory itself (they write many files under it)
DIRECTORY_APIS = ("torch.distributed.checkpoint", "transformers.")


_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)(.*)$")  # an object's URL (s3://bucket/key): not a file path


def _norm(path: str) -> str:
    """os.path.normpath, keeping a URL's scheme:// (normpath would make s3://b/k s3:/b/k)."""
    m = _URL.match(path)
    return m.group(1) + os.path.normpath(m.group(2)) if m else os.path.normpath(path)


def _common(paths: list[str]) -> str:
    """The deepest path (or URL of one scheme) that holds all of `paths`; the first when none does."""
    schemes = {(_URL.match(p) or [None, ""])[1] for p in paths}
    if len(schemes) != 1:
        return paths[0]
    scheme = schemes.pop()
    try:
        return scheme + os.path.commonpath([p[len(scheme) :] for p in paths])
    except ValueError:  # absolute and relative paths
        return paths[0]


def step_in_path(path: str | None) -> int | None:
    """The step number a checkpoint path names in its last two components, if any."""
    if not path:
        return None
    parts = _norm(path).split(os.sep)[-2:]
    for part in reversed(parts):
        m = list(STEP_IN_NAME.finditer(part))
        if m:
            return int(m[-1].group(1))
    return None


def _is_dir_save(w: Window) -> bool:
    return (w.name or "").startswith(DIRECTORY_APIS)


def checkpoint_key(w: Window) -> tuple | None:
    """What identifies the checkpoint a window belongs to, or None (a window of its own)."""
    if w.source == "inferred":
        return None
    if w.step is not None:
        return (w.kind, "step", int(w.step))
    if not w.path:
        return None
    # a marked window's path is what the program called its checkpoint (a file or a folder);
    # an automatic one's is a file in the checkpoint's folder, or that folder (DCP, HF)
    marked = w.source != "patch"
    folder = _norm(w.path) if marked or _is_dir_save(w) else os.path.dirname(_norm(w.path))
    return (w.kind, "dir", folder, step_in_path(w.path))


def _app_bytes(parts: list[Window]) -> float | None:
    """Each file once. An automatic part's bytes are the size of its path, measured after the
    save (a DCP directory that every rank reports is counted once, at the largest size seen;
    files under a directory a part reports are in it); a marked part's bytes are what the
    program said that part wrote, so marked parts add up."""
    known = [p for p in parts if p.bytes_app is not None]
    if not known:
        return None
    total = sum(float(p.bytes_app or 0.0) for p in known if p.source != "patch" or not p.path)
    sizes: dict[str, float] = {}
    for p in known:
        if p.source == "patch" and p.path:
            key = _norm(p.path)
            sizes[key] = max(sizes.get(key, 0.0), float(p.bytes_app or 0.0))
    dirs = {_norm(p.path) for p in parts if p.path and _is_dir_save(p)}
    for k, v in sizes.items():
        if not any(k.startswith(d + os.sep) for d in dirs):
            total += v
    return total


def _blocking_s(parts: list[Window], first: Window) -> float | None:
    """The time the slowest part held its caller: an async save's blocking time, else its duration."""
    if all(p.blocking_s is None for p in parts):
        return None
    return max(
        (p.start_ns - first.start_ns) / 1e9
        + (p.blocking_s if p.blocking_s is not None else ((p.app_end_ns or p.start_ns) - p.start_ns) / 1e9)
        for p in parts
    )


def merge_parts(parts: list[Window]) -> Window:
    """The windows of one save (group_saves) as one checkpoint: first start → last return, its
    bytes each file once, failed if any part failed; its parts kept (module docstring)."""
    if len(parts) == 1:
        w, key = parts[0], checkpoint_key(parts[0])
        if w.step is None and key is not None and key[1] == "dir" and key[3] is not None:
            return replace(w, step=key[3])  # the step its path names
        return w
    first = min(parts, key=lambda p: p.start_ns)
    ends = [p.app_end_ns for p in parts]
    app_end = None if any(e is None for e in ends) else max(e for e in ends if e is not None)
    failed = [p for p in parts if p.ok is False]
    ranks = {p.rank for p in parts}
    paths = {_norm(p.path) for p in parts if p.path}
    key = checkpoint_key(first)
    if len(paths) > 1:
        path = _common(sorted(paths))
    else:
        path = next(iter(paths), None)
    nested = [i for p in parts for i in (p.id, *p.nested_ids)]
    # a load's page-cache state as the restore started: per path the first part's look (a later
    # part finds the pages an earlier one read, e.g. HF's optimizer load after its model load)
    cache: dict[str, tuple[float, float]] = {}
    for p in sorted(parts, key=lambda p: p.start_ns):
        if p.cached_bytes_at_start is not None and p.file_bytes_at_start:
            cache.setdefault(_norm(p.path or p.id), (p.cached_bytes_at_start, p.file_bytes_at_start))
    steps = {p.step for p in parts} - {None}
    return replace(
        first,
        start_ns=first.start_ns,
        app_end_ns=app_end,
        bytes_app=_app_bytes(parts),
        path=path,
        step=next(iter(steps)) if len(steps) == 1 else (key[3] if key and key[1] == "dir" else None),
        rank=next(iter(ranks)) if len(ranks) == 1 else None,
        ok=False if failed else (None if any(p.ok is None for p in parts) else True),
        error=failed[0].error if failed else None,
        blocking_s=_blocking_s(parts, first),
        nested_ids=nested,
        parts=sorted(parts, key=lambda p: (p.start_ns, str(p.rank))),
        own_finish_s=max((p.own_finish_s or 0.0 for p in parts), default=0.0) or None,
        cached_bytes_at_start=sum(c for c, _ in cache.values()) if cache else None,
        file_bytes_at_start=sum(f for _, f in cache.values()) if cache else None,
    )


def group_saves(wins: list[Window]) -> list[Window]:
    """The windows of one save → one checkpoint (module docstring); order by start kept."""
    groups: list[list[Window]] = []
    open_by_key: dict = {}  # key → index of its latest group
    for w in sorted(wins, key=lambda w: w.start_ns):
        key = checkpoint_key(w)
        g = open_by_key.get(key) if key is not None else None
        if g is not None and key is not None:
            parts = groups[g]
            end = max((p.app_end_ns or float("inf")) for p in parts)
            mine = [p for p in parts if p.pid == w.pid]
            my_end = max(((p.app_end_ns or float("inf")) for p in mine), default=None)
            # the same call on the same path again in one process is the next save (or load); HF's
            # resume reads one folder in four different calls, which are one restore
            same_file_again = any(p.pid == w.pid and p.path and p.path == w.path and p.name == w.name for p in parts)
            # a window the program marked itself (ckprof.checkpoint, the workload) is one save
            # by its own word: two from one process stay two
            marked_twice = w.source != "patch" and any(p.source != "patch" and p.pid == w.pid for p in parts)
            near_group = w.start_ns <= end + JOIN_GAP_S * 1e9
            if my_end is None:
                in_phase = near_group
            elif key[1] == "step":
                # the step names the save, so a pause up to JOIN_GAP_S is still it; one process's
                # loads of that step (HF's resume, spread over its start-up) join across more
                in_phase = near_group or (w.kind == "load" and w.start_ns <= my_end + SAME_PROCESS_LOAD_GAP_S * 1e9)
            else:
                gap = SAME_PROCESS_LOAD_GAP_S if w.kind == "load" else SAME_PROCESS_GAP_S
                in_phase = w.start_ns <= my_end + gap * 1e9
            in_phase = in_phase and not marked_twice
            if in_phase and not same_file_again:
                parts.append(w)
                continue
        groups.append([w])
        if key is not None:
            open_by_key[key] = len(groups) - 1
    return [merge_parts(parts) for parts in groups]
