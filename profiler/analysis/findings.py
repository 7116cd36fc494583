"""Every note of one recording's report, in one place: what could not be measured and why, and what
a figure needs said beside it. Each is a Note with a stable `code` (tests and programs match the
code; the words are for people, and are the report's JSON `notes`), and a `subject` where it is
about one checkpoint or device.

| code | when |
|---|---|
| recorder | a note the recorder wrote into meta.json |
| unreadable | the reader skipped something it could not read (a part, an event line) |
| file_activity | file activity was not recorded, so windows could not come from it |
| windows_inferred | no markers: windows were inferred from device write bursts |
| no_block_samples | no block-device samples at all |
| energy_source | a power/energy series could not be used as it is (ckprof.power.sources) |
| idle_baseline | no idle power baseline before the first checkpoint |
| energy_not_measured | no power or energy series |
| temperature_not_measured | no temperature series |
| device_gone | a recorded device went away (subject: the device) |
| workload_seconds | a `ckprof workload` recording: its own seconds per save beside the windows |
| durability_unknown | the file tracker could not run: no checkpoint's durability is known |
| not_durable | a save not durable: no storage behind its files (subject: the checkpoint) |
| deleted_before_durable | a save's file deleted while still dirty |
| sampling_gap | block samples missing around a checkpoint: its device bandwidth unknown |
| device_unknown | a checkpoint's device figures unknown (the one rule, checkpoints.py) |
| bytes_app_unknown | files of a save had no size (deleted, gone, not read in a flood): its app bytes unknown |
| gpu_idle_unknown | a GPU's idle seconds unknown in a checkpoint |
| blocking_unknown | saves no call timed (found from files or device bursts): whether training waited on them unknown |
| failed | a save that reported an error |
| no_end_marker | a save that did not return before the recording ended |
| energy_range | a window shorter than two sensor updates: its energy is a range |
| not_a_storage_read | a load served from the page cache |
| not_durable_at_return | a save that returned with data only in the page cache |
| windows_overlap | checkpoint windows overlap in time |
| no_checkpoint_time | --mtbf/--gpus given but no checkpoint time measured |
| async_steps_unknown | saves with a background phase but no training steps recorded: their cost in slower steps unknown |
"""

from __future__ import annotations

from .checkpoints import DEVICE_READ_WARN_SHARE
from .model import ABSENT, Checkpoint
from .model_base import Note
from .records import Window


def recorder(text: str) -> Note:
    return Note("recorder", str(text))


def unreadable(text: str) -> Note:
    return Note("unreadable", str(text))


def file_activity(text: str) -> Note:
    return Note("file_activity", text)


def energy_source(text: str) -> Note:
    return Note("energy_source", text)


def idle_baseline(text: str) -> Note:
    return Note("idle_baseline", text)


def windows_inferred(threshold_bps: float, baseline_bps: float, merge_gap_s: float) -> Note:
    return Note(
        "windows_inferred",
        "no checkpoint markers in this recording: windows were inferred from device write "
        f"bursts (above {threshold_bps / 2**20:.1f} MiB/s, baseline {baseline_bps / 2**20:.1f} MiB/s, "
        f"a quiet gap of {merge_gap_s:g} s or more separates two); "
        "application bytes, end and outcome are unknown for them",
    )


def no_block_samples() -> Note:
    return Note(
        "no_block_samples", "no block-device samples: bytes at the devices, bandwidth and queue depth not measured"
    )


def energy_not_measured() -> Note:
    return Note(
        "energy_not_measured",
        "energy not measured: the recording has no power or energy series (no GPU, RAPL, "
        "NVMe power or node power collector ran)",
    )


def temperature_not_measured() -> Note:
    return Note(
        "temperature_not_measured",
        "temperature not measured: no temperature series in this recording (NVMe/GPU collectors)",
    )


def device_gone(dev: str, at_s: float, why: str) -> Note:
    return Note(
        "device_gone",
        f"{dev} went away at {at_s:.2f} s ({why}): its figures from then on are unknown, not 0",
        dev,
    )


def workload_seconds(write_s: list[float], window_s: list[float], object_store: bool = False) -> Note:
    publishing = "the manifest's PUT" if object_store else "manifest, rename, directory fsync"
    writes = "the last rank's completed upload" if object_store else "the last rank's fsync"
    return Note(
        "workload_seconds",
        f"workload saves: the ranks' writes (barrier to {writes}, the workload's own "
        f"seconds) took {min(write_s):.3f}–{max(write_s):.3f} s of windows of {min(window_s):.3f}–{max(window_s):.3f} s; the rest "
        f"is publishing ({publishing}) and the wait at the barrier",
    )


def durability_unknown(reason) -> Note:
    return Note("durability_unknown", f"durability unknown for every checkpoint: {reason}")


def blocking_unknown(saves: list[Checkpoint]) -> Note:
    found = sorted({"their files" if r.source == "files" else "device write bursts" for r in saves})
    return Note(
        "blocking_unknown",
        f"{len(saves)} save(s) found from {' and '.join(found)} with no call timed "
        f"({', '.join(r.id for r in saves[:5])}{', ...' if len(saves) > 5 else ''}): whether the training "
        "loop waited on them is unknown (a background thread, a forked or native writer and a "
        "synchronous save write the same files), so their blocking time, the run's time blocked, "
        "goodput and mean checkpoint are not stated; a patched framework call (record without "
        "--no-patch) or `with ckprof.checkpoint():` around the save times it",
    )


def checkpoint_notes(r: Checkpoint) -> list[Note]:
    """What one checkpoint's row needs said beside its figures, in the report's order."""
    cid = r.id
    out = []
    if r.durable is False:
        first = r.durable_basis[0]  # deleted before durable, or no storage behind the file
        deleted = first.startswith("deleted")
        what = "DELETED BEFORE DURABLE: " if deleted else "NOT DURABLE: "
        code = "deleted_before_durable" if deleted else "not_durable"
        out.append(Note(code, f"checkpoint {cid}: {what}{first.removeprefix('not durable: ')}", cid))
    if r.sampling_gap_s:
        out.append(
            Note(
                "sampling_gap",
                f"checkpoint {cid}: block samples missing for {r.sampling_gap_s:.2f} s around it "
                "(a sampling gap): its device bytes are exact, its device bandwidth is not measured",
                cid,
            )
        )
    if r.device_unknown:
        out.append(
            Note(
                "device_unknown",
                f"checkpoint {cid}: device figures unknown: "
                + "; ".join(u.reason for u in r.device_unknown)
                + (": left out of the run's device total and mean bandwidth" if r.kind == "save" else ""),
                cid,
            )
        )
    if r.bytes_app_unknown:  # files of the save had no size (ABSENT where none lacked one)
        out.append(Note("bytes_app_unknown", f"checkpoint {cid}: app bytes unknown: {r.bytes_app_unknown}", cid))
    if any(v is None for v in (r.gpu_idle_s_by_gpu or {}).values()):  # a GPU unknown: the basis says why
        out.append(Note("gpu_idle_unknown", f"checkpoint {cid}: GPU idle seconds {r.gpu_idle_basis}", cid))
    if r.ok is False:
        out.append(
            Note(
                "failed",
                f"checkpoint {cid}: FAILED ({r.error or 'the save reported an error'}): left out of the run's means",
                cid,
            )
        )
    elif r.app_end_s is None:
        out.append(
            Note(
                "no_end_marker",
                f"checkpoint {cid}: no end marker (the save did not return before the recording ended)",
                cid,
            )
        )
    slow = {c: e for c, e in (r.energy or {}).items() if e.energy_j_min is not None}
    if slow:
        win_s = (r.durable_end_s or r.app_end_s or r.start_s) - r.start_s
        out.append(
            Note(
                "energy_range",
                f"checkpoint {cid}: energy of {', '.join(sorted(slow))} given as a range: the window "
                f"({win_s:.2f} s) is shorter than two updates of the sensor ("
                + ", ".join(f"{c} every {e.update_period_s:.2g} s" for c, e in sorted(slow.items()))
                + "), which cannot say what happened inside one; the range is the lowest to highest power it "
                "reported around the window, widened by its largest change between two updates",
                cid,
            )
        )
    if r.kind == "load" and r.ok is not False:
        dev, cache = _known(r.device_read_share), _known(r.cache_served_share)
        low_dev = dev is not None and dev < DEVICE_READ_WARN_SHARE
        if low_dev or (cache is not None and cache > 1 - DEVICE_READ_WARN_SHARE):
            what = [f"{dev:.0%} of its bytes came from the devices"] if dev is not None else []
            if cache is not None:
                what.append(f"{cache:.0%} were in the page cache as it started (cachestat)")
            out.append(
                Note(
                    "not_a_storage_read",
                    f"load {cid}: NOT A STORAGE READ: {' and '.join(what)}; its bandwidth is the "
                    "page cache's. Measure a cold restore: `ckprof evict PATH` first (no root), or "
                    "`ckprof workload load` (evicts its files), or --drop-caches (root)",
                    cid,
                )
            )
    if r.durable_at_return is False and r.pending_bytes_at_return is not None:  # else: no storage
        out.append(
            Note(
                "not_durable_at_return",
                f"checkpoint {cid}: NOT DURABLE when the save returned: "
                f"{(r.pending_bytes_at_return or 0) / 2**20:.1f} MiB still dirty in the page cache "
                "(no fsync?)",
                cid,
            )
        )
    return out


def _known(v):
    """A figure, or None where it is absent (a key only a load's row has)."""
    return None if v is ABSENT else v


def windows_overlap(wins: list[Window], spans: list[tuple]) -> Note | None:
    """What overlapping windows (start → durable end) mean for their figures, or None."""
    order = sorted(range(len(spans)), key=lambda k: spans[k][0])
    groups, end = [], None
    for k in order:
        if groups and spans[k][0] < end:
            groups[-1].append(k)
            end = max(end, spans[k][1])
        else:
            groups.append([k])
            end = spans[k][1]
    shared = [g for g in groups if len(g) > 1]
    if not shared:
        return None
    n = sum(len(g) for g in shared)
    who = {(wins[k].rank, wins[k].pid) for g in shared for k in g}
    why = (
        f"from {len(who)} processes/ranks saving at once"
        if len(who) > 1
        else "of one process (a save still reaching the devices when the next began)"
    )
    return Note(
        "windows_overlap",
        f"{n} checkpoint windows overlap in time, {why}: the devices' bytes of the shared intervals are "
        "split among them (each byte counted once, docs/analysis.md), but each window's energy is that of "
        "its whole span, so the energy of the shared time is counted in each of them",
    )


def no_checkpoint_time() -> Note:
    return Note(
        "no_checkpoint_time", "no checkpoint time measured: the optimal interval at scale could not be computed"
    )


def async_steps_unknown(saves: int) -> Note:
    return Note(
        "async_steps_unknown",
        f"{saves} save(s) wrote in the background, but no training steps were recorded (train_step events: "
        "torch.optim's step hook under the patch, or ckprof.step() in the loop): what the background write "
        "cost the steps beside it is unknown (run.async_effect.slower_steps_s null)",
    )
