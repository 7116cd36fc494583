"""A checkpoint's durable end, from its own files' pages — never from the devices' totals.

The recorder's file tracker (ckprof.record.filetracker) asks cachestat(2) about each file a save
named until none of its pages is dirty or under writeback, and writes one event per file. Here:

- durable end = the latest of its files' `file_durable` times (the save's return when
  ckprof.checkpoint() saw every page clean as it returned); `durable: true` only when every file
  has such an event;
- any file unlinked with pages still dirty (`file_deleted_before_durable`, or gone before the
  tracker's first look after the save left pages dirty) → `durable: false`, "deleted before durable";
- otherwise, with no file-level evidence for some file (no path, cachestat unavailable, the file
  could not be opened, the recording ended first) → `durable: null`, with the reason.

The devices' write totals and the host's Dirty+Writeback (/proc/meminfo, machine-wide) appear only
as a hint in `durable_basis`, labelled as such (windows.durable_end_hint).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

FILE_EVENTS = (
    "file_durable",
    "file_deleted_before_durable",
    "file_gone_before_poll",
    "file_pending_at_end",
    "file_untracked",
)
MIB = 1024 * 1024


def _v(x):
    return None if x is None or (isinstance(x, float) and pd.isna(x)) else x


@dataclass
class FileEvidence:
    """The recording's file events, by checkpoint id, and whether the tracker ran."""

    tracker: dict | None = None  # the file_tracker event (ok, reason)
    by_id: dict = field(default_factory=dict)
    ends: dict = field(default_factory=dict)  # checkpoint id → its checkpoint_end event
    renamed: dict = field(default_factory=dict)  # checkpoint id → paths the app renamed away (checkpoint_extend)

    @classmethod
    def of(cls, rec) -> "FileEvidence":
        ev = rec.events
        out = cls()
        if ev.empty or "event" not in ev:
            return out
        tr = ev[ev["event"] == "file_tracker"]
        if len(tr):
            out.tracker = {k: _v(v) for k, v in tr.iloc[-1].items()}
        for _, r in ev[ev["event"].isin(FILE_EVENTS)].iterrows():
            out.by_id.setdefault(str(r["id"]), []).append({k: _v(v) for k, v in r.items()})
        for _, r in ev[ev["event"] == "checkpoint_end"].iterrows():
            out.ends[str(r["id"])] = {k: _v(v) for k, v in r.items()}
        if "renamed_to" in ev:
            for _, r in ev[(ev["event"] == "checkpoint_extend") & ev["renamed_to"].notna()].iterrows():
                out.renamed.setdefault(str(r["id"]), set()).add(str(r["path"]))
        return out


def _mib(n) -> str:
    n = n or 0
    return f"{n / MIB:.2f} MiB" if n >= MIB else f"{n / 1024:.1f} KiB"


def durable_end(w: dict, fe: FileEvidence, hint: dict | None = None) -> dict:
    """{durable, durable_end_ns, durable_at_return, pending_bytes_at_return, durable_basis}."""
    out = {
        "durable": None,
        "durable_end_ns": None,
        "durable_at_return": None,
        "pending_bytes_at_return": None,
        "durable_basis": [],
    }
    basis = out["durable_basis"]
    app_end = w["app_end_ns"]
    end = fe.ends.get(w["id"], {})
    at_ret, n_ret = end.get("pending_bytes_at_return"), end.get("files_at_return")
    have_ret = at_ret is not None and n_ret
    # a torch.save / DCP / safetensors save inside `with ckprof.checkpoint():` is part of it: its files too
    ids = (w["id"], *w.get("nested_ids", ()))
    moved = set().union(*(fe.renamed.get(i, set()) for i in ids))
    # a file renamed to its final name did not vanish: the new name is tracked in its place
    # parts of one checkpoint (ranks naming one DCP folder) have the same files watched: each once
    files = list(
        {
            (f["event"], f.get("path")): f
            for i in ids
            for f in fe.by_id.get(i, [])
            if not (f["event"] == "file_gone_before_poll" and f.get("path") in moved)
        }.values()
    )
    if have_ret:
        out["pending_bytes_at_return"] = float(at_ret)
        out["durable_at_return"] = at_ret == 0
    elif files and all(f.get("first_poll_pending_bytes") is not None for f in files):
        # no look at the return itself: the tracker's first look, shortly after (pages only get
        # cleaner without new writes, so dirty then means dirty at the return)
        first = sum(f["first_poll_pending_bytes"] for f in files)
        out["pending_bytes_at_return"] = float(first)
        out["durable_at_return"] = first == 0
        if app_end is not None:
            lag = max(f["first_poll_ns"] for f in files) - app_end
            basis.append(f"at return: the tracker's first look, {lag / 1e6:.0f} ms after it")

    def unknown(reason: str) -> dict:
        basis.insert(0, f"unknown: {reason}")
        _hint(out, hint)
        return out

    if fe.tracker is None:
        return unknown("recorded without the file tracker (no file-level evidence)")
    if not fe.tracker.get("ok"):
        return unknown(f"file tracker did not run: {fe.tracker.get('reason')}")
    if not w.get("path") and not files:
        return unknown("the checkpoint named no path (ckprof.checkpoint(path=...)), so no file was watched")
    if app_end is None:
        return unknown("the save did not return before the recording ended")
    if not files:
        return unknown("no file of the checkpoint was seen by the tracker (the recording ended first?)")

    deleted = [f for f in files if f["event"] == "file_deleted_before_durable"]
    gone = [f for f in files if f["event"] == "file_gone_before_poll"]
    if gone and have_ret and at_ret > 0:  # dirty at return, then gone before anyone saw it clean
        deleted += gone
        gone = []
    if deleted:
        out["durable"] = False
        basis.insert(
            0,
            "deleted before durable: "
            + "; ".join(
                f"{f['path']} ({_mib(f.get('pending_bytes') if f.get('pending_bytes') is not None else at_ret)}"
                " not on the device)"
                for f in deleted
            ),
        )
        # no device-total hint here: a machine-wide "durable end at …" beside a checkpoint whose
        # files never reached the device read as a contradiction (frameworks tier, retention)
        return out
    clean_at_return = have_ret and at_ret == 0
    reasons = []
    for f in files:
        if f["event"] == "file_gone_before_poll" and not clean_at_return:
            reasons.append(
                f"{f['path']} removed before the tracker's first look; whether its pages were on the device is unknown"
            )
        elif f["event"] == "file_pending_at_end":
            reasons.append(
                f"the recording ended with {_mib(f.get('pending_bytes'))} of {f['path']} still dirty in the page cache"
            )
        elif f["event"] == "file_untracked":
            reasons.append(f"{f['path']} could not be watched: {f.get('reason')}")
    if reasons:
        return unknown("; ".join(reasons))
    durable = [f for f in files if f["event"] == "file_durable"]
    if clean_at_return:
        t = float(app_end)
        basis.insert(0, f"every page of its {int(n_ret)} file(s) was clean when the save returned (cachestat)")
    else:
        t = max(float(app_end), max(float(f["t_ns"]) for f in durable))
        basis.insert(
            0,
            f"all {len(durable)} file(s) had no dirty or writeback page (cachestat); the last one's is the durable end",
        )
    out["durable"] = True
    out["durable_end_ns"] = t
    _hint(out, hint)
    return out


def _hint(out: dict, hint: dict | None) -> None:
    if not hint:
        return
    at = hint.get("durable_end_ns")
    what = "no durable end" if at is None else f"a durable end at {(at - hint['start_ns']) / 1e9:.2f} s"
    out["durable_basis"].append(
        f"hint only, not the verdict (device totals and host Dirty+Writeback are "
        f"machine-wide): they suggest {what} — " + "; ".join(hint["durable_basis"])
    )
