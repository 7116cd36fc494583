"""`ckprof compare`'s per-save side by side: save k of each recording (two targets of one workload, a
disk and an object store, say), its bytes, seconds and GiB/s, where its bytes went (block devices,
NFS and FUSE mounts, S3 endpoints, network interfaces: report `checkpoints[].devices` and
`.remote`, analysis/remote.py and object_store.py) and where it became durable.

Each row is one figure of save k: `values` has one entry per recording, null with its `why` where
that recording lacks it. A place's entry is a list of {name, bytes, seconds, gib_per_s}: bytes
written to it (a device's write bytes, an NFS mount's or S3 endpoint's bytes sent, an interface's
transmitted bytes, a FUSE daemon's write bytes), over its seconds (the sampling intervals the save's
window touches, or the window itself for S3), at its GiB/s (derived by the analysis; null where it
gives none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckprof.analysis.model import Checkpoint, Report

from . import tables as T

MAX_SIDE_BY_SIDE_SAVES = 20  # saves in the Markdown side-by-side table (the JSON has all)
PLACE_KINDS = ("block devices", "NFS mounts", "FUSE mounts", "S3 endpoints", "network interfaces")
NOT_RECORDED = {
    "NFS mounts": "no NFS mount recorded in this save's window",
    "FUSE mounts": "no FUSE mount recorded in this save's window",
    "S3 endpoints": "no S3 request in this save's window",
    "network interfaces": "no interface recorded: the net collector did not run",
}


@dataclass(frozen=True)
class PlaceFigure:
    """One place a save's bytes went (a device, an NFS mount, an S3 endpoint...): the bytes written
    to it (B), over its seconds (s), at its GiB/s; null where not known. In the JSON an object
    {name, bytes, seconds, gib_per_s}."""

    name: str
    bytes: float | None
    seconds: float | None
    gib_per_s: float | None


@dataclass(frozen=True)
class SaveFigureRow:
    """One figure of save k (from 1) in each recording: `values` one per recording (a place kind's
    a list of PlaceFigure), null with its `why` where that recording lacks it. In the JSON an
    object of these keys, in this order (`saves[]`)."""

    save: int
    figure: str
    unit: str
    provenance: str
    values: list[Any]
    why: list[str | None]


def _place(name: str, nbytes, seconds, gib_per_s) -> PlaceFigure:
    return PlaceFigure(name, nbytes, seconds, gib_per_s)


def _devices(c: Checkpoint):
    if c.device_unknown and all(d.unknown is not None for d in c.devices.values()):
        return None, "; ".join(dict.fromkeys(u.reason for u in c.device_unknown))
    if not c.devices:
        return None, "no block device recorded"
    load = c.kind == "load"
    out = [
        _place(
            dev,
            d.read_bytes if load else d.write_bytes,
            d.span_s,
            d.mean_read_gib_per_s if load else d.mean_write_gib_per_s,
        )
        for dev, d in sorted(c.devices.items())
        if d.unknown is None
    ]
    return out, None


def _remote(c: Checkpoint, kind: str):
    rm = T.known(c.remote)
    if kind == "NFS mounts":
        nfs = None if rm is None else T.known(rm.nfs)
        if nfs:
            return [
                _place(f"{m} ({n.export})", n.bytes_sent, n.span_s, n.gib_per_s_to_server)
                for m, n in sorted(nfs.items())
            ], None
    elif kind == "FUSE mounts":
        fuse = None if rm is None else T.known(rm.fuse)
        if fuse:
            return [_place(m, f.daemon_write_bytes, None, None) for m, f in sorted(fuse.items())], None
    elif kind == "S3 endpoints":
        s3 = None if rm is None else T.known(rm.object_store)
        if s3 is not None:
            name = ", ".join(s3.endpoints) or "S3 (endpoint not recorded)"
            return [_place(name, s3.bytes_sent, s3.window_s, s3.gib_per_s_sent)], None
    elif kind == "network interfaces":
        ifs = None if rm is None else T.known(rm.interfaces)
        if ifs:
            return [_place(i, n.tx_bytes, n.span_s, n.tx_gib_per_s) for i, n in sorted(ifs.items())], None
    return None, NOT_RECORDED[kind]


def places(c: Checkpoint, kind: str):
    """(list of places, None) or (None, why there are none) for one kind of place of a save."""
    return _devices(c) if kind == "block devices" else _remote(c, kind)


# one save's plain figures: (label, unit, provenance, function of a save → value, or None)
def _outcome(c: Checkpoint) -> str:
    if c.ok is False:
        return f"FAILED: {c.error or 'the save reported an error'}"
    return "did not finish before the recording ended" if c.app_end_s is None else "finished"


SAVE_FIGURES = [
    ("path", "text", "recorded", lambda c: c.path),
    ("outcome", "text", "recorded", _outcome),
    ("bytes (the save's files)", "B", "measured", lambda c: c.bytes_app),
    ("seconds (its window: call to return, or future's completion)", "s", "derived", lambda c: c.duration_s),
    ("application rate", "GiB/s", "derived", lambda c: c.app_gib_per_s),
    ("blocked (the stall the loop saw)", "s", "derived", lambda c: c.blocking_s),
    ("durable where", "text", "derived", lambda c: c.durable_where),
    ("durable when the save returned", "text", "derived", T.durable_cell),
]

WHY_NONE = {
    "path": "the save did not say its path",
    "bytes (the save's files)": "the save's file sizes are unknown",
    "seconds (its window: call to return, or future's completion)": "the save did not finish",
    "application rate": "bytes or seconds unknown",
    "blocked (the stall the loop saw)": "the call was not timed",
    "durable where": "not said: see the report's durable_basis",
}


def side_by_side(reports: list[Report]) -> list[SaveFigureRow]:
    """Save k of each recording, figure by figure (k from 1, in the order the reports list them)."""
    saves = [[c for c in r.checkpoints if c.kind == "save"] for r in reports]
    rows: list[SaveFigureRow] = []
    for k in range(max((len(s) for s in saves), default=0)):
        mine = [s[k] if k < len(s) else None for s in saves]
        missing = [f"the recording has {len(s)} save(s)" for s in saves]
        for label, unit, prov, fn in SAVE_FIGURES:
            vals = [None if c is None else fn(c) for c in mine]
            whys = [
                missing[i] if c is None else (WHY_NONE.get(label, "unknown") if v is None else None)
                for i, (c, v) in enumerate(zip(mine, vals))
            ]
            rows.append(SaveFigureRow(k + 1, label, unit, prov, vals, whys))
        for kind in PLACE_KINDS:
            got = [(None, missing[i]) if c is None else places(c, kind) for i, c in enumerate(mine)]
            if all(v is None and (c is None or w in NOT_RECORDED.values()) for c, (v, w) in zip(mine, got)):
                continue  # a kind no recording has for this save: no row of n/a's
            rows.append(
                SaveFigureRow(
                    save=k + 1,
                    figure=f"where the bytes went: {kind}",
                    unit="B, s, GiB/s per place",
                    provenance="measured bytes; derived GiB/s",
                    values=[v for v, _ in got],
                    why=[w for _, w in got],
                )
            )
    return rows


def _place_text(p: PlaceFigure) -> str:
    rate = T.num(p.gib_per_s, "{:.3f} GiB/s", none="GiB/s n/a")
    secs = T.num(p.seconds, "{:.2f} s", none="s n/a")
    return f"{p.name}: {T.b(p.bytes)} in {secs}, {rate}"


def cell(v, why, unit: str) -> str:
    if v is None:
        return f"n/a ({why})" if why else "—"
    if isinstance(v, list):  # places: those that got bytes; measured zeros said once for all
        got = [p for p in v if p.bytes]
        zero = [p.name for p in v if p.bytes == 0]
        unknown = [p.name for p in v if p.bytes is None]
        parts = [_place_text(p) for p in got]
        parts += [f"0 B to {', '.join(zero)}"] if zero else []
        parts += [f"bytes unknown: {', '.join(unknown)}"] if unknown else []
        return "; ".join(parts) or "none"
    if unit == "B":
        return T.b(v)
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def table(
    recordings: list[str], saves: list[SaveFigureRow], max_saves: int = MAX_SIDE_BY_SIDE_SAVES
) -> tuple[list[str], list[list[str]], str | None]:
    """The side-by-side rows for Markdown: (headers, rows, a line saying what was left out, or None)."""
    names = [f"[{i + 1}] {p}" for i, p in enumerate(recordings)]
    headers = ["save", "figure [unit, provenance]"] + names
    rows = []
    n_saves = max((r.save for r in saves), default=0)
    for r in saves:
        if r.save > max_saves:
            break
        rows.append(
            [str(r.save), f"{r.figure} [{r.unit}, {T.TAG.get(r.provenance, r.provenance)}]"]
            + [cell(v, w, r.unit) for v, w in zip(r.values, r.why)]
        )
    cut = (
        f"first {max_saves} of {n_saves} saves; all of them: ckprof compare --format json"
        if n_saves > max_saves
        else None
    )
    return headers, rows, cut
