"""One recording's report as typed results (docs/report-format.md): frozen dataclasses, every figure
field with its unit and provenance in its metadata (model_base.figure). The JSON report is
`Report.to_jsonable()`; the renderers (report/) read these attributes.

Field order is the JSON's key order. A field that is ABSENT is a key only some rows have (a load's
restore figures, a save's cold-restore prediction): left out of the JSON, not null.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .model_base import ABSENT, DERIVED, ESTIMATED, MEASURED, PER_ENTRY, WORST, Model, Note, figure, plain

SINCE_START = "s since recording start"
GIBPS = "GiB/s"


# -- a checkpoint's parts ----------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceUnknown(Model):
    """One figure ckprof cannot stand behind (checkpoints.unknown_entry): which device (None: the
    checkpoint as a whole), a stable `code` (device_gone, no_sample, sampling_gap,
    no_block_device), the reason in words, since when."""

    device: str | None = plain()
    code: str = plain()
    reason: str = plain()
    since_s: float | None = figure(SINCE_START, DERIVED)


# the figures of a device, in the order an unknown device's (null) entry lists them
UNKNOWN_DEVICE_ORDER = (
    "write_bytes",
    "read_bytes",
    "mean_write_gib_per_s",
    "peak_write_gib_per_s",
    "mean_read_gib_per_s",
    "peak_read_gib_per_s",
    "mean_aqu_sz",
    "peak_aqu_sz",
    "peak_in_flight",
    "span_s",
    "longest_interval_s",
)


@dataclass(frozen=True)
class DeviceFigures(Model):
    """One block device over a checkpoint (checkpoints.device_stats): null with `unknown` set where
    the device's figures are unknown there."""

    span_s: float | None = figure("s", DERIVED, "the sampling intervals the window touches")
    longest_interval_s: float | None = figure("s", MEASURED, "the longest sampling interval among them")
    unknown: DeviceUnknown | None = plain()
    write_bytes: float | None = figure("B (this checkpoint's share)", DERIVED)
    mean_write_gib_per_s: float | None = figure(GIBPS, DERIVED)
    peak_write_gib_per_s: float | None = figure(GIBPS, DERIVED)
    read_bytes: float | None = figure("B (this checkpoint's share)", DERIVED)
    mean_read_gib_per_s: float | None = figure(GIBPS, DERIVED)
    peak_read_gib_per_s: float | None = figure(GIBPS, DERIVED)
    mean_aqu_sz: float | None = figure("requests (iostat aqu-sz)", DERIVED)
    peak_aqu_sz: float | None = figure("requests (iostat aqu-sz)", DERIVED)
    peak_in_flight: float | None = figure("requests", MEASURED)

    def to_jsonable(self) -> dict:
        out = super().to_jsonable()
        if self.unknown is None:
            return out
        # an unknown device's entry has always listed its (null) figures in this order: the same
        # keys, values and order as reports before the typed model (tests/test_report_json_stable.py)
        return {k: out[k] for k in (*UNKNOWN_DEVICE_ORDER, "unknown")}


@dataclass(frozen=True)
class EnergyFigures(Model):
    """One component's energy over a checkpoint (ckprof.power.energy.window_energy); its
    `provenance` is the worst of its sources'."""

    energy_j: float | None = figure("J", PER_ENTRY)
    above_idle_j: float | None = figure("J", PER_ENTRY)
    j_per_gib: float | None = figure("J/GiB", PER_ENTRY)
    above_idle_j_per_gib: float | None = figure("J/GiB", PER_ENTRY)
    provenance: str = plain()
    method: str = plain("energy counter | integrated power | SSD power per interval")
    sources: list[str] = plain(factory=list)
    coverage: float | None = figure("fraction of window with readings", DERIVED)
    update_period_s: float | None = figure("s (how often the slowest sensor's value changes)", DERIVED)
    energy_j_min: float | None = figure("J (a window shorter than two sensor updates)", ESTIMATED)
    energy_j_max: float | None = figure("J (a window shorter than two sensor updates)", ESTIMATED)


@dataclass(frozen=True)
class SsdEfficiency(Model):
    """One SSD (NVMe controller) over a checkpoint (checkpoints.ssd_efficiency): labelled with its
    energy's provenance, since bandwidth is measured but SSD power often is not."""

    bytes: float | None = figure("B (this checkpoint's, on the SSD's block devices)", DERIVED)
    energy_j: float | None = figure("J", PER_ENTRY)
    mean_w: float | None = figure("W", PER_ENTRY)
    gb_per_s_per_w: float | None = figure("GB/s per W (= GB/J, 1 GB = 1e9 B)", PER_ENTRY)
    j_per_gib: float | None = figure("J/GiB", PER_ENTRY)
    provenance: str = plain()
    coverage: float | None = figure("fraction of window with readings", DERIVED)
    devices: list[str] = plain(factory=list)


@dataclass(frozen=True)
class ThrottleSource(Model):
    """One throttle signal over a checkpoint."""

    events: int = figure("events", MEASURED)
    seconds: float = figure("s", MEASURED)
    what: str = plain()


@dataclass(frozen=True)
class Part(Model):
    """One rank's or one file's window of a grouped checkpoint (checkpoints.parts_of)."""

    id: str = plain()
    rank: int | None = plain()
    host: str | None = plain()
    pid: int | None = plain()
    path: str | None = plain()
    api: str | None = plain()
    start_s: float | None = figure(SINCE_START, MEASURED)
    app_end_s: float | None = figure(SINCE_START, MEASURED)
    duration_s: float | None = figure("s", DERIVED)
    bytes_app: float | None = figure("B", MEASURED)
    ok: bool | None = plain()
    error: str | None = plain()
    # a rank's own phases, where the checkpoint wrote in the background (analysis/phases.py)
    blocking_s: float | None = figure("s (that rank's call, start to return)", MEASURED, absent=True)
    phases: list[Phase] = plain("that rank's phases, where the checkpoint has a background phase", absent=True)


@dataclass(frozen=True)
class Writer(Model):
    """A process that wrote files of a file-level save (analysis/filesaves.py); ppid and cmdline
    are absent where the process was not seen starting."""

    pid: int = plain()
    ppid: int | None = plain(absent=True)
    comm: str | None = plain()
    cmdline: list[str] | None = plain(absent=True)
    why_unknown: str | None = plain(absent=True)
    comm_from: str | None = plain(
        "whose comm this is, where not the process's own reading (a fork's parent's)", absent=True
    )
    files: int = figure("count", MEASURED)
    bytes: float | None = figure(
        "B (the files this process alone wrote, their sizes after the save; null: a size unknown)", MEASURED
    )


# -- an async save's phases and the steps beside it (analysis/phases.py) ---------------------------


@dataclass(frozen=True)
class Phase(Model):
    """One phase of a save with a background part: blocked, staging, persist or durable; its
    `provenance` says how its ends are known (measured or derived)."""

    name: str = plain("blocked, staging, persist or durable")
    start_s: float | None = figure(SINCE_START, PER_ENTRY)
    end_s: float | None = figure(SINCE_START, PER_ENTRY)
    duration_s: float | None = figure("s", PER_ENTRY)
    bytes: float | None = figure("B (the save's application bytes, for staging and persist)", PER_ENTRY)
    gib_per_s: float | None = figure(GIBPS, DERIVED, "bytes / duration")
    provenance: str = plain("measured or derived (how start and end are known)")
    basis: str = plain("what the phase's ends stand on")
    # staging on a GPU: the device-to-host copy (a staging event that says; else absent)
    d2h_bytes: float | None = figure(
        "B (Σ numel × element size of the state dict's CUDA tensors at the staging call)", MEASURED, absent=True
    )
    d2h_s: float | None = figure(
        "s (the staging span the copy ran in: no CUDA event brackets it)", DERIVED, absent=True
    )
    d2h_gib_per_s: float | None = figure(GIBPS, DERIVED, "d2h_bytes / d2h_s", absent=True)
    d2h_basis: str | None = plain("what the D2H figures stand on, or why they are unknown", absent=True)
    # when a GPU is recorded (analysis/gpu_idle.py's rule over the phase's span)
    gpu_idle_s: float | None = figure("s (mean over the GPUs that are known)", DERIVED, absent=True)
    gpu_idle_basis: str | None = plain("which GPUs the mean stands on, or 'unknown: why'", absent=True)


@dataclass(frozen=True)
class StepEffect(Model):
    """The training steps (train_step events) that overlapped a save's persist phase against the
    steps that overlapped no checkpoint window (analysis/phases.py states the rule)."""

    steps_overlapping: int = figure("steps (≥ half their time in this save's persist phase)", DERIVED)
    steps_other: int = figure("steps (overlapping no checkpoint window)", DERIVED)
    median_step_overlapping_s: float | None = figure("s", DERIVED)
    median_step_other_s: float | None = figure("s", DERIVED)
    inflation_pct: float | None = figure("% (median overlapping / median other − 1)", DERIVED)
    slower_steps_s: float | None = figure("s (Σ overlapping step − median other step)", DERIVED)


@dataclass(frozen=True)
class AsyncEffect(Model):
    """The run's async saves: the stall they avoided (estimated: had they blocked for their whole
    window) against the seconds of slower steps while they persisted."""

    async_saves: int = figure("count (saves with a background phase)", DERIVED)
    blocked_s: float | None = figure("s (Σ of their blocked phases)", MEASURED)
    sync_equivalent_s: float | None = figure("s (Σ of their windows: the stall had they been synchronous)", ESTIMATED)
    stall_avoided_s: float | None = figure("s (sync equivalent − blocked)", ESTIMATED)
    slower_steps_s: float | None = figure("s (Σ of the saves' slower_steps_s)", DERIVED)
    net_s: float | None = figure("s (stall avoided − slower steps)", ESTIMATED)


@dataclass(frozen=True)
class RunSteps(Model):
    """The run's training steps (train_step events: torch.optim's post-hook or ckprof.step()), by
    analysis/phases.py's rule, whether its saves were synchronous or not: each step's own time (a
    save's blocked part inside it taken out); a step with no time of its own is left out."""

    step_ends: int = figure("count (train_step events used, all processes)", MEASURED)
    processes: int = figure("count (processes that recorded steps)", MEASURED)
    steps: int = figure("steps (with a known start and time of their own)", DERIVED)
    median_step_s: float | None = figure("s (all steps, each one's own time)", DERIVED)
    steps_no_save: int = figure("steps (overlapping no save's window)", DERIVED)
    median_step_no_save_s: float | None = figure("s (the steps overlapping no save's window)", DERIVED)
    why_unknown: str | None = plain("why the medians are null (null where they are known)")


# -- where a checkpoint's bytes went off the machine (analysis/remote.py, object_store.py, fuse.py) --


@dataclass(frozen=True)
class NfsMount(Model):
    """One NFS mount over a checkpoint: every sampling interval the window touches (/proc/self/mountstats)."""

    export: str = plain()
    span_s: float | None = figure("s (the sampling intervals the window touches)", DERIVED)
    bytes_sent: float | None = figure("B (RPC payload and headers, all operations)", MEASURED)
    bytes_received: float | None = figure("B (RPC payload and headers, all operations)", MEASURED)
    ops: float | None = figure("requests", MEASURED)
    ops_by_op: dict[str, float] = figure("requests", MEASURED, default=None)
    write_ops: float | None = figure("requests", MEASURED)
    mean_rtt_ms: float | None = figure("ms (Σ RTT / Σ requests)", DERIVED)
    max_interval_mean_rtt_ms: float | None = figure("ms (the highest interval's mean: no per-request max)", DERIVED)
    retransmits: float | None = figure("count", MEASURED)
    major_timeouts: float | None = figure("count", MEASURED)
    gib_per_s_to_server: float | None = figure(GIBPS, DERIVED)
    normal_write_bytes: float | None = figure("B (written by applications, buffered)", DERIVED)
    direct_write_bytes: float | None = figure("B (written by applications, O_DIRECT)", DERIVED)
    server_write_bytes: float | None = figure("B (WRITE payload that reached the server)", DERIVED)
    server_read_bytes: float | None = figure("B", DERIVED)


@dataclass(frozen=True)
class InterfaceFigures(Model):
    """One network interface over a checkpoint (/sys/class/net/*/statistics)."""

    span_s: float | None = figure("s (the sampling intervals the window touches)", DERIVED)
    rx_bytes: float | None = figure("B", MEASURED)
    tx_bytes: float | None = figure("B", MEASURED)
    rx_packets: float | None = figure("packets", MEASURED)
    tx_packets: float | None = figure("packets", MEASURED)
    rx_errors: float | None = figure("count", MEASURED)
    tx_errors: float | None = figure("count", MEASURED)
    rx_dropped: float | None = figure("packets", MEASURED)
    tx_dropped: float | None = figure("packets", MEASURED)
    tx_gib_per_s: float | None = figure(GIBPS, DERIVED)


@dataclass(frozen=True)
class OpLatency(Model):
    p50_ms: float | None = figure("ms", DERIVED)
    p99_ms: float | None = figure("ms", DERIVED)
    max_ms: float | None = figure("ms", MEASURED)


@dataclass(frozen=True)
class ObjectStoreFigures(Model):
    """The S3 requests whose replies came back in a checkpoint's window (s3_request events)."""

    window_s: float = figure("s (the checkpoint's window the requests came back in)", DERIVED)
    requests: int = figure("requests", MEASURED)
    requests_by_op: dict[str, int] = figure("requests", MEASURED, default=None)
    aggregated_requests: int = figure("requests (counted in per-second sums)", MEASURED)
    objects_written: int = figure("objects", MEASURED)
    bytes_sent: float | None = figure("B (PutObject and UploadPart bodies)", MEASURED)
    gib_per_s_sent: float | None = figure(GIBPS + " (bytes_sent / window_s)", DERIVED)
    bytes_received: float | None = figure("B (GetObject bodies)", MEASURED)
    multipart_parts: int | None = figure("parts", MEASURED)
    latency_p50_ms: float | None = figure("ms (the call's time, retries inside it)", DERIVED)
    latency_p99_ms: float | None = figure("ms (the call's time, retries inside it)", DERIVED)
    latency_from_buckets: bool = plain("some latencies from per-second sums' buckets")
    latency_by_op: dict[str, OpLatency] = plain(factory=dict)
    retries: int | None = figure("count (botocore's RetryAttempts)", MEASURED)
    errors: int = figure("requests (failed after their retries)", MEASURED)
    errors_by_code: dict[str, int] = figure("requests", MEASURED, default=None)
    throttled: int = figure("requests", MEASURED)
    failed_attempts_by_code: dict[str, int] = figure("attempts", MEASURED, default=None)
    throttled_attempts: int = figure("attempts", MEASURED)
    list_calls_by_caller: dict[str, int] = figure("requests", MEASURED, default=None)
    endpoints: list[str] = plain(factory=list)
    unknown: dict[str, str] = plain(factory=dict)


@dataclass(frozen=True)
class FuseMount(Model):
    """One FUSE mount over a checkpoint: its queue (readings inside the window) and its daemon's I/O."""

    connection: int = plain()
    readings: int = figure("count", MEASURED)
    max_waiting: float | None = figure("requests", MEASURED)
    mean_waiting: float | None = figure("requests", DERIVED)
    busy_fraction: float | None = figure("fraction of readings with a request waiting", DERIVED)
    daemon_rchar: float | None = figure("B", MEASURED)
    daemon_wchar: float | None = figure("B", MEASURED)
    daemon_read_bytes: float | None = figure("B", MEASURED)
    daemon_write_bytes: float | None = figure("B", MEASURED)
    daemon_pid: int | None = plain()


@dataclass(frozen=True)
class Remote(Model):
    """Where a checkpoint's bytes went off the machine; a kind the recording has none of is absent."""

    nfs: dict[str, NfsMount] = plain(absent=True)
    interfaces: dict[str, InterfaceFigures] = plain(absent=True)
    object_store: ObjectStoreFigures = plain(absent=True)
    fuse: dict[str, FuseMount] = plain(absent=True)


@dataclass(frozen=True)
class Checkpoint(Model):
    """One checkpoint window: a save or a load (checkpoints.checkpoint_row and the steps after it)."""

    # a load's bytes from the application, the devices and the page cache (checkpoints.restore_truth)
    restore_bytes_app: float | None = figure("B (a load's files)", MEASURED, absent=True)
    restore_bytes_device: float | None = figure(
        "B (read by the recorded devices, this load's share)", DERIVED, absent=True
    )
    cache_served_share: float | None = figure(
        "fraction of a load's bytes in the page cache as it started (cachestat(2))", MEASURED, absent=True
    )
    device_read_share: float | None = figure("fraction: device bytes read / the load's bytes", DERIVED, absent=True)
    restore_basis: list[str] = plain(absent=True)
    id: str = plain()
    source: str = plain("markers: api | patch | workload ...; inferred; files")
    kind: str = plain("save | load")
    step: int | None = plain()
    rank: int | None = plain()
    path: str | None = plain()
    api: str | None = plain()
    ok: bool | None = plain()
    error: str | None = plain()
    start_s: float = figure(SINCE_START, MEASURED)
    app_end_s: float | None = figure(SINCE_START, MEASURED)
    durable_end_s: float | None = figure(SINCE_START, DERIVED)
    duration_s: float | None = figure("s", DERIVED)
    blocking_s: float | None = figure("s", DERIVED)
    durable_duration_s: float | None = figure("s", DERIVED)
    durable: bool | None = plain()
    durable_at_return: bool | None = plain()
    pending_bytes_at_return: float | None = figure("B", DERIVED)
    durable_basis: list[str] = plain(factory=list)
    bytes_app: float | None = figure("B (the save's files, each counted once across its parts)", MEASURED)
    bytes_app_unknown: str | None = plain(
        "why bytes_app is null, where files of the save had no size (deleted, gone, or not read in a flood)",
        absent=True,
    )
    bytes_device: float | None = figure(
        "B (written for a save, read for a load; this checkpoint's share of each interval it shares with others)",
        DERIVED,
    )
    device_to_app_ratio: float | None = figure("ratio", DERIVED)
    app_gib_per_s: float | None = figure(GIBPS, DERIVED)
    device_gib_per_s: float | None = figure(GIBPS, DERIVED)
    sampling_gap_s: float | None = figure(
        "s (longest block-sample interval in the window when it is a gap; null otherwise)", MEASURED
    )
    device_unknown: list[DeviceUnknown] = plain(factory=list)
    device_span_s: float | None = figure("s", DERIVED)
    devices: dict[str, DeviceFigures] = plain(factory=dict)
    energy: dict[str, EnergyFigures] = plain(factory=dict)
    energy_total_j: float | None = figure("J", WORST)
    energy_total_basis: str | None = figure(
        "text (the components added; a node meter stands for the parts inside it)", DERIVED
    )
    peak_temp_c: float | None = figure("°C", MEASURED)
    peak_temp_by_sensor_c: dict[str, float] = figure("°C", MEASURED, default=None)
    throttle_events: int | None = figure("events", MEASURED)
    throttle_s: float | None = figure("s (the longest of the sources)", MEASURED)
    throttle_by_source: dict[str, ThrottleSource] = plain(factory=dict)
    gpu_idle_s: float | None = figure(
        "s (mean over the GPUs known in the window; idle: the share of each NVML period no kernel ran: docs/power.md)",
        DERIVED,
    )
    gpu_idle_s_by_gpu: dict[str, float | None] = figure("s", DERIVED, default=None)
    gpu_idle_basis: str | None = figure("text (which GPUs the mean stands on, or 'unknown: why')", DERIVED)
    own_finish_s: float | None = figure("s (the app's fsync/rename after the save call returned)", MEASURED)
    finished_by: str | None = plain()
    device_busy_s: float | None = figure("s (the busiest device's %util × time, start → return)", DERIVED)
    parts: list[Part] | None = plain()
    slowest_part: Part | None = plain()
    ssd_efficiency: dict[str, SsdEfficiency] = plain(factory=dict)
    writers: list[Writer] | None = plain()
    workload_write_s: float | None = figure(
        "s (a ckprof workload save: barrier to the last rank's fsync; null for other saves)", MEASURED
    )
    durable_where: str | None = plain()
    file_system: str | None = plain()
    predicted_cold_restore_s: float | None = figure(
        "s (its bytes / the devices' cold read rate)", ESTIMATED, absent=True
    )
    restore_prediction_basis: str = plain(absent=True)
    prediction_error: float | None = figure(
        "fraction: (predicted − measured) / measured, a cold load", DERIVED, absent=True
    )
    phases: list[Phase] = plain("a save with a background phase (analysis/phases.py)", absent=True)
    step_effect: StepEffect = plain("where training steps were recorded", absent=True)
    remote: Remote = plain("where NFS, network, S3 or FUSE figures were recorded", absent=True)


# -- the run -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TargetFileSystem(Model):
    """One --path's file system as mounted at the start (meta.json topology.paths[].mount, from
    /proc/self/mountinfo, proc(5))."""

    path: str = plain()
    mount_point: str | None = plain()
    fstype: str | None = plain()
    source: str | None = plain()
    options: str | None = plain("the mount's options (ro/rw, noatime, ...); null: not recorded")
    super_options: str | None = plain("the file system's own options (e.g. data=ordered); null: not recorded")


@dataclass(frozen=True)
class DlioProvenance(Model):
    version: str | None = plain()
    commit: str | None = plain("the commit it was installed from (direct_url.json, PEP 610)")
    unknown: str | None = plain("why the version is unknown")
    archive_sha256: str | None = plain("sha256 of the archive it was installed from (direct_url.json, PEP 610)")


@dataclass(frozen=True)
class Provenance(Model):
    """What the recording was made with (meta.json `provenance`, docs/recording-format.md): a
    null value is unknown, with the reason beside it where ckprof knows it."""

    kernel: str | None = plain()
    ckprof_version: str | None = plain("the recorder's")
    python: str | None = plain("the recorder's")
    libraries: dict[str, str] | None = plain("version per library installed for the command's Python")
    libraries_unknown: str | None = plain("why `libraries` is null")
    dlio: DlioProvenance | None = plain("when the command is DLIO (dlio_benchmark)")
    nvme_firmware: dict[str, str | None] = plain("firmware revision per recorded disk", factory=dict)
    gpu_driver: str | None = plain("NVML's driver version, where a GPU was recorded")
    gpu_driver_unknown: str | None = plain("why `gpu_driver` is null")
    file_systems: list[TargetFileSystem] = plain(factory=list)
    command_sha256: str | None = plain("sha256 of the argv joined with NUL bytes")
    config_sha256: dict[str, str] = plain("sha256 per config file named in the argv", factory=dict)
    config_not_hashed: dict[str, str] = plain("why a config file named in the argv was not hashed", factory=dict)


@dataclass(frozen=True)
class RecordingInfo(Model):
    path: str = plain()
    hostname: str | None = plain()
    command: list[str] | str | None = plain()
    start_wall_ns: int | None = figure("ns since the Unix epoch", MEASURED)
    duration_s: float = figure("s", MEASURED)
    interval_s: float | None = figure("s (the sampling period asked for)", MEASURED)
    analysis_resolution_s: float = figure("s", DERIVED)
    status: str | None = plain()
    exit: Any = plain()
    collectors: list[str] = plain(factory=list)
    devices: list[str] = plain(factory=list)
    provenance: Provenance | None = plain("null: a recording made before ckprof wrote provenance")


@dataclass(frozen=True)
class LeftOutSave(Model):
    id: str = plain()
    code: str = plain()
    reason: str = plain()


@dataclass(frozen=True)
class LeftOut(Model):
    """The saves a run figure stands on: `of` them, `counted`, and each left out with why."""

    of: int = figure("count", DERIVED)
    counted: int = figure("count", DERIVED)
    left_out: list[LeftOutSave] = plain(factory=list)


@dataclass(frozen=True)
class DeviceLeftOut(Model):
    bytes_device_total: LeftOut = plain()
    mean_device_gib_per_s: LeftOut = plain()


@dataclass(frozen=True)
class Run(Model):
    wall_s: float = figure("s", MEASURED)
    checkpoints: int = figure("count (saves that did not fail)", MEASURED)
    failed_checkpoints: int = figure("count", MEASURED)
    loads: int = figure("count", MEASURED)
    windows_from: str = plain("markers | markers+files | files | inferred")
    blocked_s: float | None = figure("s", DERIVED)
    blocked_share: float | None = figure("fraction of wall time", DERIVED)
    goodput_estimate: float | None = figure("fraction of wall time", ESTIMATED)
    mean_checkpoint_s: float | None = figure("s", DERIVED)
    mean_restart_s: float | None = figure("s", DERIVED)
    bytes_app_total: float | None = figure("B", MEASURED)
    bytes_device_total: float | None = figure("B", DERIVED)
    mean_device_gib_per_s: float | None = figure(GIBPS, DERIVED)
    device_left_out: DeviceLeftOut | None = plain()
    mean_energy_j: float | None = figure("J", WORST)
    peak_temp_c: float | None = figure("°C", MEASURED)
    not_durable_at_return: int = figure("count", DERIVED)
    write_baseline_bytes_per_s: float | None = figure("B/s", DERIVED)
    write_threshold_bytes_per_s: float | None = figure("B/s", DERIVED)
    idle_power_w: dict[str, float | None] = figure("W (per source)", DERIVED, default=None)
    idle_power_w_by_component: dict[str, float | None] = figure(
        "W (sum of the component's sources)", DERIVED, default=None
    )
    steps: RunSteps | None = plain("the run's training steps (null: a report from before they were given)")
    async_effect: AsyncEffect = plain("where a save had a background phase", absent=True)


@dataclass(frozen=True)
class Scale(Model):
    """The optimal checkpoint interval at a scale (analysis/scale.py); the report's `scale` is {}
    where it was not asked for or no checkpoint time was measured."""

    mtbf_s: float = figure("s", ESTIMATED)
    mtbf_source: str = plain()
    gpus: int | None = plain()
    checkpoint_s: float = figure("s", DERIVED)
    checkpoint_source: str = plain()
    restart_s: float = figure("s", DERIVED)
    restart_source: str = plain()
    young_interval_s: float = figure("s", ESTIMATED)
    daly_interval_s: float = figure("s", ESTIMATED)
    overhead_at_daly: float = figure("fraction of wall time", ESTIMATED)
    goodput_at_daly: float = figure("fraction of wall time", ESTIMATED)


@dataclass(frozen=True)
class ThrottleOnset(Model):
    source: str = plain()
    what: str = plain()
    t_s: float = figure(SINCE_START, MEASURED)
    temp_c: float | None = figure("°C", MEASURED)


@dataclass(frozen=True)
class HotVsCool(Model):
    hottest_id: str = plain()
    hottest_peak_temp_c: float | None = figure("°C", MEASURED)
    hottest_gib_per_s: float | None = figure(GIBPS, DERIVED)
    hottest_mean_aqu_sz: float | None = figure("requests (iostat aqu-sz)", DERIVED)
    coolest_id: str = plain()
    coolest_peak_temp_c: float | None = figure("°C", MEASURED)
    coolest_gib_per_s: float | None = figure(GIBPS, DERIVED)
    coolest_mean_aqu_sz: float | None = figure("requests (iostat aqu-sz)", DERIVED)
    bandwidth_ratio_hot_to_cool: float | None = figure("ratio", DERIVED)


@dataclass(frozen=True)
class Throttling(Model):
    seen: bool = plain()
    statement: str = plain()
    onsets: list[ThrottleOnset] = plain(factory=list)
    events_in_checkpoints: int | None = figure("events", MEASURED)
    seconds_in_checkpoints: float | None = figure("s", MEASURED)
    temp_vs_write_correlation: float | None = figure("Pearson r", DERIVED)
    temp_vs_write_points: int = figure("count", DERIVED)
    hot_vs_cool: HotVsCool | None = plain()


@dataclass(frozen=True)
class Advice(Model):
    """One thing that would help, from a measured figure (analysis/advice.py): `id` is its rule."""

    id: str = plain()
    text: str = plain()
    figures: dict[str, Any] = plain(factory=dict)


@dataclass(frozen=True)
class FileFsync(Model):
    """One checkpoint file's fsync as the recording shows it (analysis/audit.py)."""

    checkpoint_id: str = plain()
    path: str | None = plain()
    fsync: bool | None = plain(
        "true: the app's os.fsync/os.fdatasync/os.sync returned inside its save's window; false: its pages "
        "were dirty at the save's end; null: no call seen"
    )
    state: str = plain("fsync | clean | dirty | unknown: at its save's end")
    pending_bytes: float | None = figure("B (dirty or under writeback at the save's end, cachestat(2))", MEASURED)
    basis: str = plain()


@dataclass(frozen=True)
class RuleCheck(Model):
    """One rule of the audit: pass, fail or unknown, why, and the figures it stands on (each key
    names its unit)."""

    id: str = plain("fsync | restore_page_cache | client_memory | subset | write_read_gap | run_timer")
    rule: str = plain()
    status: str = plain("pass | fail | unknown")
    reason: str = plain()
    figures: dict[str, Any] = plain(factory=dict)
    files: list[FileFsync] = plain("the fsync rule's files, not fsync'd first (at most 64)", factory=list)


@dataclass(frozen=True)
class Audit(Model):
    """The run against MLPerf Storage v3.0's checkpoint rules (analysis/audit.py)."""

    rules: str = plain()
    passed: int = figure("count", DERIVED)
    failed: int = figure("count", DERIVED)
    unknown: int = figure("count", DERIVED)
    checks: list[RuleCheck] = plain(factory=list)


@dataclass(frozen=True)
class Report(Model):
    schema: str = plain()
    schema_version: int = plain()
    ckprof_version: str = plain()
    recording: RecordingInfo = plain()
    run: Run = plain()
    scale: Scale | None = plain()
    checkpoints: list[Checkpoint] = plain(factory=list)
    throttling: Throttling = plain()
    notes: list[Note] = plain(factory=list)
    fields: dict[str, dict[str, str]] = plain(factory=dict)
    advice: list[Advice] = plain(factory=list)
    audit: Audit | None = plain("MLPerf Storage v3.0's checkpoint rules (null: a report from before the audit)")

    def to_jsonable(self) -> dict:
        out = super().to_jsonable()
        if out["scale"] is None:
            out["scale"] = {}  # the JSON's `scale` is an empty object where it was not computed
        return out

    @classmethod
    def from_jsonable(cls, d: Report | dict) -> Report:  # a Report is passed through
        if isinstance(d, Report):
            return d
        if d.get("scale") == {}:
            d = {**d, "scale": None}
        return super().from_jsonable(d)


__all__ = [
    "ABSENT",
    "Advice",
    "AsyncEffect",
    "Audit",
    "Checkpoint",
    "DeviceFigures",
    "DeviceUnknown",
    "EnergyFigures",
    "FileFsync",
    "Part",
    "Phase",
    "Provenance",
    "Remote",
    "Report",
    "RuleCheck",
    "Run",
    "RunSteps",
    "Scale",
    "SsdEfficiency",
    "StepEffect",
    "Throttling",
    "Writer",
]
