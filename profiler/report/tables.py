"""The report's tables as plain strings (header, rows), shared by the Markdown and HTML renderers.
Each takes the report model (analysis/model.py), or its JSON form (read back into the model).

Each header names its unit and provenance: [m] measured, [d] derived, [e] estimated.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ckprof.analysis.model import ABSENT, Checkpoint, DeviceUnknown, LeftOut, Phase, Report, RunSteps
from ckprof.recording.fstypes import OBJECT_SCHEMES, url_scheme
from ckprof.units import fmt_bytes

TAG = {"measured": "m", "derived": "d", "estimated": "e"}


def known(v):
    """A figure, or None where it is unknown or absent (a key only some rows have)."""
    return None if v is ABSENT else v


# a run figure that rests on every save's blocking time, where a save no call timed left it unknown
# (findings.blocking_unknown says which)
UNTIMED = "unknown (a save no call timed)"


def num(v, fmt="{:.2f}", none="—") -> str:
    if v is None or v is ABSENT:
        return none
    try:
        return fmt.format(v)
    except (TypeError, ValueError):
        return str(v)


def pct(v) -> str:
    return num(None if v is None else v * 100, "{:.1f} %")


def b(v) -> str:
    return "—" if v is None or v is ABSENT else fmt_bytes(v)


# a run figure's left-out saves, in a few words (run.device_left_out's codes; a new code shows as itself)
LEFT_OUT_WHY = {
    "device_gone": "a device went away",
    "no_sample": "no block sample covers it",
    "sampling_gap": "a sampling gap",
    "unfinished": "did not finish",
    "no_block_samples": "no block samples",
    "no_block_device": "no block device behind it (an object store)",
}
# device figures that do not apply (checkpoints.NO_BLOCK_DEVICE: an object store): n/a, not unknown
NOT_APPLICABLE = {"no_block_device"}


def left_out(text: str, lo: LeftOut | None) -> str:
    """A run figure with what it leaves out: "1.2 GiB/s (over 1 of 3 saves; 2 left out: a device
    went away; see the notes)", with each reason's count when there are several; "unknown (...)"
    when none counted. The notes give each save's reason."""
    if not lo or not lo.left_out:
        return text
    whys: dict[str, int] = {}
    for x in lo.left_out:
        w = LEFT_OUT_WHY.get(x.code, x.code)
        whys[w] = whys.get(w, 0) + 1
    why = next(iter(whys)) if len(whys) == 1 else ", ".join(f"{w} ({n})" for w, n in whys.items())
    if not lo.counted:
        return f"unknown (every save left out: {why}; see the notes)"
    return f"{text} (over {lo.counted} of {lo.of} saves; {len(lo.left_out)} left out: {why}; see the notes)"


STEP_S = "{:.4g} s"  # a step may last milliseconds: four significant digits


def steps_cell(st: RunSteps | None) -> str:
    """The run's training steps (run.steps): how many, and the median step's own time, all of them
    and those beside no save; where a median is unknown, why (never 0)."""
    if st is None:
        return "unknown: a report from before ckprof counted training steps"
    if not st.steps:
        return f"unknown: {st.why_unknown or 'no step with a known start'}"
    procs = f"{st.processes} process{'es' if st.processes != 1 else ''}"
    cell = (
        f"{st.steps} steps, {procs}; median step {num(st.median_step_s, STEP_S, none='unknown')} (all), "
        f"{num(st.median_step_no_save_s, STEP_S, none='unknown')} (no save running)"
    )
    return cell + (f" (unknown: {st.why_unknown})" if st.why_unknown else "")


def summary_rows(rep: Report | dict) -> list[tuple[str, str, str]]:
    """(what, value with unit, provenance) rows."""
    rep = Report.from_jsonable(rep)  # or its JSON form
    run, rec = rep.run, rep.recording
    lo = run.device_left_out
    command = rec.command if isinstance(rec.command, list) else list(rec.command or [])
    rows = [
        ("command", " ".join(map(str, command)) or "—", "recorded"),
        ("host", str(rec.hostname or "—"), "recorded"),
        ("wall time", num(run.wall_s, "{:.1f} s"), "measured"),
        (
            "checkpoint windows",
            f"{run.checkpoints} save, {run.loads} load (from {run.windows_from})",
            "measured" if run.windows_from == "markers" else "derived",
        ),
        (
            "time blocked by checkpoints",
            f"{num(run.blocked_s, '{:.2f} s')} = {pct(run.blocked_share)} of wall time"
            if run.blocked_s is not None
            else UNTIMED,
            "derived",
        ),
        (
            "goodput estimate (no failures)",
            pct(run.goodput_estimate) if run.blocked_s is not None else UNTIMED,
            "estimated",
        ),
        (
            "mean checkpoint (blocking)",
            num(run.mean_checkpoint_s, "{:.3f} s", none="—" if run.blocked_s is not None else UNTIMED),
            "derived",
        ),
        (
            "bytes saved (application / devices)",
            f"{b(run.bytes_app_total)} / " + left_out(b(run.bytes_device_total), lo.bytes_device_total if lo else None),
            "measured",
        ),
        (
            "mean device bandwidth",
            left_out(num(run.mean_device_gib_per_s, "{:.3f} GiB/s"), lo.mean_device_gib_per_s if lo else None),
            "derived",
        ),
        ("mean energy per checkpoint", num(run.mean_energy_j, "{:.1f} J"), "see table"),
        ("peak temperature", num(run.peak_temp_c, "{:.1f} °C"), "measured"),
        ("not durable when the save returned", str(run.not_durable_at_return), "derived"),
        ("training steps", steps_cell(run.steps), "derived"),
    ]
    for comp, w in sorted((run.idle_power_w_by_component or {}).items()):
        rows.append((f"idle power before the first checkpoint: {comp}", num(w, "{:.1f} W"), "derived"))
    sc = rep.scale
    if sc:
        rows += [
            ("MTBF used", f"{num(sc.mtbf_s / 3600, '{:.2f} h')} ({sc.mtbf_source})", "estimated"),
            ("checkpoint time used", f"{num(sc.checkpoint_s, '{:.3f} s')} ({sc.checkpoint_source})", "estimated"),
            ("optimal interval, Young", num(sc.young_interval_s, "{:.0f} s"), "estimated"),
            ("optimal interval, Daly", num(sc.daly_interval_s, "{:.0f} s"), "estimated"),
            ("overhead at Daly interval (checkpoints + lost work)", pct(sc.overhead_at_daly), "estimated"),
            ("goodput at Daly interval", pct(sc.goodput_at_daly), "estimated"),
            ("restart time used", f"{num(sc.restart_s, '{:.2f} s')} ({sc.restart_source})", "estimated"),
        ]
    return rows


CHECKPOINT_HEADERS = [
    "#",
    "source",
    "kind",
    "step",
    "path",
    "start [s, m]",
    "save call [s, d]",
    "durable after [s, d]",
    "durable at return",
    "app bytes [m]",
    "device bytes (load: read) [m]",
    "dev/app [d]",
    "GiB/s app [d]",
    "GiB/s device [d]",
    "mean/peak QD, busiest device [d]",
    "peak in-flight [m]",
    "energy J (above idle)",
    "J/GiB",
    "peak °C [m]",
    "throttle events / s [m]",
    "GPU idle s [d]",
]


def energy_cell(r: Checkpoint) -> str:
    if not r.energy:
        return "—"
    parts = []
    for comp, e in sorted(r.energy.items()):
        above = "" if e.above_idle_j is None else f" ({e.above_idle_j:.1f})"
        if e.energy_j_min is not None:  # shorter than two sensor updates: a range, not a point
            parts.append(
                f"{comp} {e.energy_j_min:.2f}–{e.energy_j_max:.2f} "
                f"(sensor updates every {e.update_period_s:.2g} s) [{TAG.get(e.provenance, '?')}]"
            )
            continue
        parts.append(f"{comp} {e.energy_j:.1f}{above} [{TAG.get(e.provenance, '?')}]")
    return "; ".join(parts)


def jpg_cell(r: Checkpoint) -> str:
    parts = [f"{c} {e.j_per_gib:.1f}" for c, e in sorted(r.energy.items()) if e.j_per_gib is not None]
    return "; ".join(parts) or "—"


def unknown_word(unknown: list[DeviceUnknown]) -> str:
    """The word for device figures the unknown rule took: n/a when none applies (an object store:
    no block device behind it), else unknown."""
    return "n/a" if unknown and all(u.code in NOT_APPLICABLE for u in unknown) else "unknown"


def unknown_cell(unknown: list[DeviceUnknown]) -> str:
    """A device figure the report cannot stand behind: "unknown: " (or "n/a: ") and each reason."""
    return f"{unknown_word(unknown)}: " + "; ".join(u.reason for u in unknown)


def durable_cell(r: Checkpoint) -> str:
    """Durable at the end of the save's window, and where (docs/analysis.md *Durability*)."""
    if r.kind == "load":
        return "n/a (load)"
    cell = {True: "yes", False: "NO (page cache)", None: "unknown"}[r.durable_at_return]
    first = (r.durable_basis or [""])[0]
    if r.durable is False:
        # "deleted before durable", or what is behind the file keeps no copy ("no storage behind tmpfs")
        return cell + (
            "; deleted before durable"
            if first.startswith("deleted")
            else "; " + first.removeprefix("not durable: ").split(" (")[0]
        )
    if r.durable is None:
        return cell + "; durable end unknown"
    where = r.durable_where
    return cell + (f"; {'in the' if where == 'object store' else 'on the'} {where}" if where else "")


def checkpoint_rows(rep: Report | dict) -> list[list[str]]:
    rep = Report.from_jsonable(rep)  # or its JSON form
    out = []
    for i, r in enumerate(rep.checkpoints, 1):
        unknown = r.device_unknown or []
        gone = unknown_word(unknown) if unknown else "—"  # a figure the unknown rule took: say so, not a dash
        qd = [d for d in r.devices.values() if d.unknown is None]
        mean_qd = max((d.mean_aqu_sz or 0 for d in qd), default=None) if qd else None
        peak_qd = max((d.peak_aqu_sz or 0 for d in qd), default=None) if qd else None
        inflight = max((d.peak_in_flight or 0 for d in qd), default=None) if qd else None
        dur_after = None if r.durable_end_s is None or r.app_end_s is None else r.durable_end_s - r.app_end_s
        durable = durable_cell(r)
        if r.ok is False:
            durable = f"FAILED: {r.error or 'the save reported an error'}"
        elif r.ok is None and r.app_end_s is None:
            durable = "did not finish before the recording ended"
        out.append(
            [
                str(i),
                str(r.source),
                str(r.kind),
                num(r.step, "{}"),
                str(r.path or "—"),
                num(r.start_s, "{:.2f}"),
                num(r.duration_s, "{:.3f}"),
                num(dur_after, "+{:.3f}"),
                durable,
                "unknown" if r.bytes_app is None and r.bytes_app_unknown else b(r.bytes_app),
                unknown_cell(unknown) if unknown else b(r.bytes_device),
                num(r.device_to_app_ratio, "{:.2f}", none=gone),
                num(r.app_gib_per_s, "{:.3f}"),
                num(r.device_gib_per_s, "{:.3f}", none=gone),
                f"{num(mean_qd, '{:.1f}', none=gone)} / {num(peak_qd, '{:.1f}', none=gone)}",
                num(inflight, "{:.0f}", none=gone),
                energy_cell(r),
                jpg_cell(r),
                num(r.peak_temp_c, "{:.1f}"),
                f"{num(r.throttle_events, '{}')} / {num(r.throttle_s, '{:.1f}')}",
                num(r.gpu_idle_s, "{:.2f}", none="unknown" if r.gpu_idle_s_by_gpu else "—"),
            ]
        )
    return out


SSD_HEADERS = ["#", "kind", "SSD", "bytes [d]", "energy [J]", "mean power [W]", "GB/s per W", "J/GiB", "power"]


def ssd_rows(rep: Report | dict) -> list[list[str]]:
    """Per checkpoint and SSD: bytes per joule (GB/s per W) and joules per GiB, with the power's provenance."""
    rep = Report.from_jsonable(rep)  # or its JSON form
    out = []
    for i, r in enumerate(rep.checkpoints, 1):
        for ctrl, e in sorted((r.ssd_efficiency or {}).items()):
            tag = TAG.get(e.provenance, "?")
            out.append(
                [
                    str(i),
                    str(r.kind),
                    f"{ctrl} ({', '.join(e.devices) or 'no recorded block device'})",
                    b(e.bytes),
                    num(e.energy_j, "{:.2f}") + f" [{tag}]",
                    num(e.mean_w, "{:.2f}") + f" [{tag}]",
                    num(e.gb_per_s_per_w, "{:.3f}") + f" [{tag}]",
                    num(e.j_per_gib, "{:.2f}") + f" [{tag}]",
                    e.provenance,
                ]
            )
    return out


RESTORE_HEADERS = [
    "#",
    "path",
    "load [s, d]",
    "app bytes [m]",
    "device bytes read [d]",
    "in page cache at start [m]",
    "from the devices [d]",
    "predicted cold [s, e]",
    "verdict",
]


def restore_rows(rep: Report | dict) -> list[list[str]]:
    """Each load: what the application read, what the devices read, what the page cache served."""
    rep = Report.from_jsonable(rep)  # or its JSON form
    out = []
    for i, r in enumerate(rep.checkpoints, 1):
        if r.kind != "load":
            continue
        dev, cache = known(r.device_read_share), known(r.cache_served_share)
        if (dev is not None and dev < 0.5) or (cache is not None and cache > 0.5):
            verdict = "NOT A STORAGE READ (page cache)"
        elif dev is None and cache is None and url_scheme(r.path) in OBJECT_SCHEMES:
            verdict = "object-store read (no page cache, no device)"
        elif dev is None and cache is None:
            verdict = "unknown (no cachestat look, no device samples)"
        else:
            verdict = "storage read"
        out.append(
            [
                str(i),
                str(r.path or "—"),
                num(r.duration_s, "{:.3f}"),
                b(r.restore_bytes_app),
                b(r.restore_bytes_device),
                num(None if cache is None else 100 * cache, "{:.0f} %"),
                # over 100 %: other reads shared the load's sampling intervals (an upper bound)
                "over 100 %" if dev is not None and dev > 1.0 else num(None if dev is None else 100 * dev, "{:.0f} %"),
                num(r.predicted_cold_restore_s, "{:.3f}")
                + ("" if known(r.prediction_error) is None else f" ({100 * r.prediction_error:+.0f} %)"),
                verdict,
            ]
        )
    return out


PART_HEADERS = ["#", "part", "rank", "host", "pid", "path", "start [s]", "duration [s]", "bytes app [m]", "outcome"]


def part_rows(rep: Report | dict) -> list[list[str]]:
    """Each grouped checkpoint's parts (ranks, files), the slowest marked: who held the save up."""
    rep = Report.from_jsonable(rep)  # or its JSON form
    out = []
    for i, r in enumerate(rep.checkpoints, 1):
        for k, p in enumerate(r.parts or [], 1):
            slow = r.slowest_part and p.id == r.slowest_part.id
            outcome = (
                f"FAILED: {p.error or 'the save reported an error'}"
                if p.ok is False
                else ("did not finish" if p.app_end_s is None else "ok")
            )
            out.append(
                [
                    str(i),
                    f"{k}{' (slowest)' if slow else ''}",
                    num(p.rank, "{}"),
                    str(p.host or "—"),
                    num(p.pid, "{}"),
                    str(p.path or "—"),
                    num(p.start_s, "{:.2f}"),
                    num(p.duration_s, "{:.3f}"),
                    b(p.bytes_app),
                    outcome,
                ]
            )
    return out


DEVICE_HEADERS = [
    "#",
    "kind",
    "device",
    "write bytes [m]",
    "read bytes [m]",
    "mean GiB/s [d]",
    "peak GiB/s [d]",
    "mean aqu-sz [d]",
    "peak aqu-sz [d]",
    "peak in-flight [m]",
]


def device_rows(rep: Report | dict) -> list[list[str]]:
    rep = Report.from_jsonable(rep)  # or its JSON form
    out = []
    for i, r in enumerate(rep.checkpoints, 1):
        load = r.kind == "load"
        io = "read" if load else "write"
        for dev, d in sorted(r.devices.items()):
            if d.unknown is not None:
                out.append(
                    [str(i), f"{r.kind} ({io}s)", dev, unknown_cell([d.unknown])] + [unknown_word([d.unknown])] * 6
                )
                continue
            out.append(
                [
                    str(i),
                    f"{r.kind} ({io}s)",
                    dev,
                    b(d.write_bytes),
                    b(d.read_bytes),
                    num(d.mean_read_gib_per_s if load else d.mean_write_gib_per_s, "{:.3f}"),
                    num(d.peak_read_gib_per_s if load else d.peak_write_gib_per_s, "{:.3f}"),
                    num(d.mean_aqu_sz, "{:.2f}"),
                    num(d.peak_aqu_sz, "{:.2f}"),
                    num(d.peak_in_flight, "{:.0f}"),
                ]
            )
    return out


def throttle_lines(rep: Report | dict) -> list[str]:
    rep = Report.from_jsonable(rep)  # or its JSON form
    t = rep.throttling
    lines = [t.statement]
    if t.temp_vs_write_correlation is not None:
        lines.append(
            f"Temperature vs write bandwidth over the run: Pearson r = {t.temp_vs_write_correlation:.2f} "
            f"over {t.temp_vs_write_points} intervals (derived)."
        )
    hc = t.hot_vs_cool
    if hc:
        lines.append(
            f"Hottest checkpoint ({hc.hottest_peak_temp_c:.1f} °C) wrote at {hc.hottest_gib_per_s:.3f} GiB/s; "
            f"coolest at a similar queue depth ({hc.coolest_peak_temp_c:.1f} °C) at "
            f"{hc.coolest_gib_per_s:.3f} GiB/s: ratio {num(hc.bandwidth_ratio_hot_to_cool, '{:.2f}')} (derived)."
        )
    for o in t.onsets:
        lines.append(
            f"{o.what} ({o.source}) first at {o.t_s:.1f} s"
            + (f", hottest sensor {o.temp_c:.1f} °C" if o.temp_c is not None else "")
            + " (measured)."
        )
    return lines


# -- an async save's phases and the steps beside it (checkpoints[].phases, .step_effect; run.async_effect)

ASYNC_HEADERS = [
    "#",
    "blocked [s] [m]",
    "staging [s]",
    "persist [s] [m]",
    "persist [GiB/s] [d]",
    "durable after [s] [d]",
    "steps overlapping [d]",
    "median step overlapping / other [s] [d]",
    "step inflation [%] [d]",
    "seconds lost to slower steps [s] [d]",
]


@dataclass(frozen=True)
class PhasesByName:
    """A save's (or a rank's) phases by the name analysis/phases.py gives each; None: not there."""

    blocked: Phase | None = None
    staging: Phase | None = None
    persist: Phase | None = None
    durable: Phase | None = None

    @classmethod
    def of(cls, phases: list[Phase]) -> PhasesByName:
        by_name = {p.name: p for p in phases}
        return cls(**{f.name: by_name.get(f.name) for f in dataclasses.fields(cls)})


def _seconds(p: Phase | None) -> str:
    return "—" if p is None else num(p.duration_s, "{:.3f}")


def _gib_per_s(p: Phase | None) -> str:
    return "—" if p is None else num(p.gib_per_s, "{:.3f}")


def async_rows(rep: Report | dict) -> list[list[str]]:
    """One row per save with a background phase; staging's cell says its own provenance."""
    rep = Report.from_jsonable(rep)  # or its JSON form
    out = []
    for i, r in enumerate(rep.checkpoints, 1):
        phases = known(r.phases)
        if not phases:
            continue
        ph = PhasesByName.of(phases)
        st = ph.staging
        staging = "—" if st is None else f"{num(st.duration_s, '{:.3f}')} [{TAG.get(st.provenance, '?')}]"
        e = known(r.step_effect)
        medians = (
            "—"
            if e is None
            else f"{num(e.median_step_overlapping_s, '{:.3f}')} / {num(e.median_step_other_s, '{:.3f}')}"
        )
        out.append(
            [
                str(i),
                _seconds(ph.blocked),
                staging,
                _seconds(ph.persist),
                _gib_per_s(ph.persist),
                _seconds(ph.durable),
                "no steps recorded" if e is None else str(e.steps_overlapping),
                medians,
                "—" if e is None else num(e.inflation_pct, "{:+.1f} %"),
                "—" if e is None else num(e.slower_steps_s, "{:.2f}"),
            ]
        )
    return out


PHASE_HEADERS = [
    "#",
    "phase",
    "start [s since recording start]",
    "end [s since recording start]",
    "duration [s]",
    "bytes [B]",
    "rate [GiB/s] [d]",
    "provenance",
    "basis",
]
# columns only a report whose phases have them gets (a GPU recorded; a staging event's D2H copy)
PHASE_GPU_HEADERS = ["GPU idle [s] [d]", "device-to-host copy: bytes [m], seconds [d], GiB/s [d]"]


def gpu_idle_cell(p) -> str:
    """A phase's GPU idle seconds with what they stand on; "unknown (why)" where the GPUs were not known."""
    v, basis = known(p.gpu_idle_s), known(p.gpu_idle_basis)
    if v is None:
        return f"unknown ({basis.removeprefix('unknown: ')})" if basis else "—"
    return f"{v:.3f} s ({basis})" if basis else f"{v:.3f} s"


def d2h_cell(p) -> str:
    """A staging phase's device-to-host copy: bytes, seconds and GiB/s, or why they are unknown."""
    basis = known(p.d2h_basis)
    if basis is None:
        return "—"
    n, secs, rate = known(p.d2h_bytes), known(p.d2h_s), known(p.d2h_gib_per_s)
    if n is None and secs is None:
        return f"unknown ({basis})"
    return f"{b(n)}, {num(secs, '{:.3f} s')}, {num(rate, '{:.3f} GiB/s')} ({basis})"


def phase_table(rep: Report | dict) -> tuple[list[str], list[list[str]]]:
    """One row per phase of every save with phases: its times, bytes and rate, each with its unit,
    how its ends are known (measured or derived) and from what; its GPU idle seconds and its
    device-to-host copy where the report has them."""
    rep = Report.from_jsonable(rep)  # or its JSON form
    phases = [(i, p) for i, r in enumerate(rep.checkpoints, 1) for p in known(r.phases) or []]
    gpu = any(known(p.gpu_idle_basis) is not None or known(p.d2h_basis) is not None for _, p in phases)
    out = []
    for i, p in phases:
        row = [
            str(i),
            p.name,
            num(p.start_s, "{:.3f}"),
            num(p.end_s, "{:.3f}"),
            num(p.duration_s, "{:.3f}"),
            "n/a (moves no bytes of its own)" if p.bytes is None else b(p.bytes),
            num(p.gib_per_s, "{:.3f}", none="n/a"),
            p.provenance,
            p.basis,
        ]
        out.append(row + ([gpu_idle_cell(p), d2h_cell(p)] if gpu else []))
    return PHASE_HEADERS + (PHASE_GPU_HEADERS if gpu else []), out


RANK_PHASE_HEADERS = [
    "#",
    "rank",
    "blocked [s]",
    "staging [s]",
    "persist [s]",
    "bytes [m]",
    "persist [GiB/s] [d]",
    "provenance (each phase: measured or derived)",
]


def rank_phase_rows(rep: Report | dict) -> list[list[str]]:
    """One row per part (rank) of a grouped save whose parts carry their own phases
    (checkpoints[].parts[].phases): that rank's blocked, staging and persist seconds, its bytes and
    persist rate, and how each phase's ends are known."""
    rep = Report.from_jsonable(rep)  # or its JSON form
    out = []
    for i, r in enumerate(rep.checkpoints, 1):
        for p in r.parts or []:
            phases = known(p.phases)
            if not phases:
                continue
            ph = PhasesByName.of(phases)
            moved = ph.persist or ph.staging
            out.append(
                [
                    str(i),
                    num(p.rank, "{}", none=str(p.id)),
                    _seconds(ph.blocked),
                    _seconds(ph.staging),
                    _seconds(ph.persist),
                    b(None if moved is None else moved.bytes),
                    _gib_per_s(ph.persist),
                    "; ".join(f"{x.name} {x.provenance}" for x in phases),
                ]
            )
    return out


def async_line(rep: Report | dict) -> str | None:
    """The run's async effect in a line, each figure with its provenance; None without async saves."""
    rep = Report.from_jsonable(rep)  # or its JSON form
    a = known(rep.run.async_effect)
    if a is None:
        return None
    cost = (
        "its cost in slower steps is unknown (no training steps recorded: torch.optim's hook or ckprof.step())"
        if a.slower_steps_s is None
        else f"cost {a.slower_steps_s:.2f} s of slower steps (derived); net {a.net_s:+.2f} s (estimated)"
    )
    return (
        f"async avoided {num(a.stall_avoided_s)} s of stall (estimated: {a.async_saves} save(s) blocked "
        f"{num(a.blocked_s)} s of their {num(a.sync_equivalent_s)} s) and {cost}"
    )


# -- where a checkpoint's bytes went off the machine (checkpoints[].remote) ----------------------

REMOTE_HEADERS = [
    "#",
    "target",
    "kind",
    "bytes sent [m]",
    "bytes received [m]",
    "to it [GiB/s] [d]",
    "RTT mean / max interval [ms] [d]",
    "requests [m]",
    "latency p50 / p99 [ms] [d]",
    "retries / errors [m]",
    "queue max / mean [requests] [m/d]",
]


def remote_rows(rep: Report | dict) -> list[list[str]]:
    """One row per checkpoint and NFS mount, interface, object store or FUSE mount it sent to."""
    rep = Report.from_jsonable(rep)  # or its JSON form
    out = []
    for i, r in enumerate(rep.checkpoints, 1):
        rm = known(r.remote)
        if rm is None:
            continue
        for mount, n in sorted((known(rm.nfs) or {}).items()):
            out.append(
                [
                    str(i), f"{mount} ({n.export})", "NFS", b(n.bytes_sent), b(n.bytes_received),
                    num(n.gib_per_s_to_server, "{:.3f}"),
                    f"{num(n.mean_rtt_ms, '{:.2f}')} / {num(n.max_interval_mean_rtt_ms, '{:.2f}')}",
                    num(n.ops, "{:.0f}"), "—",
                    f"{num(n.retransmits, '{:.0f}')} retransmits / {num(n.major_timeouts, '{:.0f}')} timeouts",
                    "—",
                ]
            )  # fmt: skip
        s3 = known(rm.object_store)
        if s3 is not None:
            out.append(
                [
                    str(i), ", ".join(s3.endpoints) or "S3", "S3", b(s3.bytes_sent), b(s3.bytes_received),
                    num(s3.gib_per_s_sent, "{:.3f}"), "—",
                    str(s3.requests),
                    f"{num(s3.latency_p50_ms, '{:.1f}')} / {num(s3.latency_p99_ms, '{:.1f}')}",
                    f"{num(s3.retries, '{}')} / {s3.errors} ({s3.throttled} throttled)",
                    "—",
                ]
            )  # fmt: skip
        for mount, f in sorted((known(rm.fuse) or {}).items()):
            out.append(
                [
                    str(i), mount, "FUSE (its daemon's I/O)", b(f.daemon_write_bytes), b(f.daemon_read_bytes),
                    "—", "—", "—", "—", "—",
                    f"{num(f.max_waiting, '{:.0f}')} / {num(f.mean_waiting, '{:.2f}')}",
                ]
            )  # fmt: skip
        for iface, n in sorted((known(rm.interfaces) or {}).items()):
            errs = None if n.tx_errors is None or n.rx_errors is None else n.tx_errors + n.rx_errors
            drops = None if n.tx_dropped is None or n.rx_dropped is None else n.tx_dropped + n.rx_dropped
            out.append(
                [
                    str(i), iface, "interface", b(n.tx_bytes), b(n.rx_bytes), num(n.tx_gib_per_s, "{:.3f}"), "—",
                    "—", "—", f"— / {num(errs, '{:.0f}')} errors, {num(drops, '{:.0f}')} dropped", "—",
                ]
            )  # fmt: skip
    return out


AUDIT_HEADERS = ["rule", "status", "why", "figures (units in their names)"]
AUDIT_FILE_HEADERS = ["checkpoint", "file", "at its save's end", "dirty [m]", "basis"]
STATUS_WORD = {"pass": "pass", "fail": "FAILED", "unknown": "unknown"}


def _figure_text(v) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def audit_rows(rep: Report | dict) -> list[list[str]]:
    """Each MLPerf Storage v3.0 rule of the audit (analysis/audit.py): status, why, its scalar
    figures (the per-load and per-checkpoint ones are in the JSON)."""
    rep = Report.from_jsonable(rep)  # or its JSON form
    if rep.audit is None:
        return []
    return [
        [
            f"{c.id}: {c.rule}",
            STATUS_WORD.get(c.status, c.status),
            c.reason,
            "; ".join(
                f"{k} {_figure_text(v)}" for k, v in c.figures.items() if v is None or isinstance(v, (int, float, str))
            ),
        ]
        for c in rep.audit.checks
    ]


def audit_file_rows(rep: Report | dict) -> list[list[str]]:
    """The fsync rule's files (not fsync'd first, at most 64): what each one's pages were at its save's end."""
    rep = Report.from_jsonable(rep)  # or its JSON form
    if rep.audit is None:
        return []
    return [
        [f.checkpoint_id, str(f.path or "—"), f.state, b(f.pending_bytes), f.basis]
        for c in rep.audit.checks
        for f in c.files
    ]
