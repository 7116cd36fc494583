"""The job report as typed results (analysis/model_base.py's pieces): frozen dataclasses, every
figure field with its unit and provenance (`figure`), the job's part of the report's `fields` table
made from them (`job_fields`), the JSON made from them by model_base.to_json (the same keys and
values as the dict the job report was before: tests/test_job_json_stable.py holds it).

Provenance words as in model_base: measured (a counter or sensor), derived (computed from measured
values by a stated rule), estimated (a model); "worst of its parts" for a sum of the nodes' joules
(an estimated part makes the sum estimated).

A host's own report inside the job (`JobReport.hosts`) is whatever analysis.analyze gives, as JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .model_base import DERIVED as D
from .model_base import MEASURED as M
from .model_base import Model, Note, field_table, figure

WORST = "worst of its parts"  # a sum of the nodes' joules (schema 1's word for the job)
WALL_NS = "ns since the Unix epoch (wall clock, through each host's anchor)"


@dataclass(frozen=True, kw_only=True)
class NodeSlowDevice(Model):
    """On one node, the carrying device (≥ SLOW_DEVICE_MIN_SHARE of its bytes) with the lowest mean rate."""

    device: str
    gib_per_s: float | None = figure("GiB/s (mean over the node's span)", D)
    bytes: float | None = figure("B (in the checkpoint's direction)", D)
    of_devices: int  # how many devices carried the node's bytes


@dataclass(frozen=True, kw_only=True)
class LastRank(Model):
    """The rank of a node that returned last from its save: it held the node's checkpoint up."""

    rank: int | None
    seconds: float | None = figure("s (that rank's save, start to return)", M)
    bytes_app: float | None = figure("B (that rank's files)", M)


@dataclass(frozen=True, kw_only=True)
class NodeInterface(Model):
    """One network interface of a node over its span of a checkpoint (/sys/class/net/*/statistics)."""

    tx_bytes: float | None = figure("B (sent)", M)
    rx_bytes: float | None = figure("B (received)", M)


@dataclass(frozen=True, kw_only=True)
class NodeNfsMount(Model):
    """One NFS mount of a node over its span of a checkpoint: its requests and their round trips
    (analysis/remote.py nfs_window, the rule of the one-host report's NFS figures)."""

    export: str
    ops: float | None = figure("requests", M)
    mean_rtt_ms: float | None = figure("ms (Σ RTT / Σ requests)", D)
    max_interval_mean_rtt_ms: float | None = figure("ms (the highest interval's mean: no per-request max)", D)
    retransmits: float | None = figure("count", M)
    unknown: dict[str, str]  # a null figure's name → why it is null


@dataclass(frozen=True, kw_only=True)
class NodeS3Requests(Model):
    """A node's S3 requests whose replies came back in its span of a checkpoint (analysis/
    object_store.py object_store_window, the rule of the one-host report's object-store figures)."""

    requests: int = figure("requests", M)
    requests_by_op: dict[str, int] = figure("requests", M)
    latency_p50_ms: float | None = figure("ms (the call's time, retries inside it)", D)
    latency_p99_ms: float | None = figure("ms (the call's time, retries inside it)", D)
    retries: int | None = figure("count (botocore's RetryAttempts)", M)
    errors: int = figure("requests (failed after their retries)", M)
    throttled: int = figure("requests", M)
    unknown: dict[str, str]  # a null figure's name → why it is null


@dataclass(frozen=True, kw_only=True)
class NodeFuseMount(Model):
    """One FUSE mount of a node over its span of a checkpoint: its queue and its daemon's writes
    (analysis/fuse.py fuse_window, the rule of the one-host report's FUSE figures)."""

    connection: int
    readings: int = figure("count", M)
    max_waiting: float | None = figure("requests", M)
    mean_waiting: float | None = figure("requests", D)
    busy_fraction: float | None = figure("fraction of readings with a request waiting", D)
    daemon_write_bytes: float | None = figure("B", M)
    daemon_read_bytes: float | None = figure("B", M)
    unknown: dict[str, str]  # a null figure's name → why it is null


@dataclass(frozen=True, kw_only=True)
class NodeNetwork(Model):
    """What a node sent and received over the network in its span of a checkpoint (analysis/remote.py:
    every sampling interval the span touches). A figure the host has no source for is null, its
    reason in `unknown`; never 0."""

    seconds: float | None = figure("s (the sampling intervals the node's span touches)", D)
    tx_bytes: float | None = figure("B (sent, summed over the node's interfaces)", M)
    rx_bytes: float | None = figure("B (received, summed over the node's interfaces)", M)
    tx_gib_per_s: float | None = figure("GiB/s (tx_bytes / seconds)", D)
    rx_gib_per_s: float | None = figure("GiB/s (rx_bytes / seconds)", D)
    interfaces: dict[str, NodeInterface]
    # the interfaces tx_bytes and rx_bytes sum: the lowest of each stack (analysis/remote.py count_once)
    interfaces_counted: list[str]
    # those left out of the sums, each with the interfaces it is stacked on (its bytes counted there);
    # null where the recording does not say (the reason in `unknown`)
    interfaces_stacked: dict[str, list[str]] | None
    nfs_bytes_sent: float | None = figure("B (RPC payload and headers to the NFS servers, all mounts)", M)
    nfs_mounts: dict[str, NodeNfsMount]  # per mount point: its requests and RTTs; empty: none (see unknown)
    s3_bytes_sent: float | None = figure("B (PutObject and UploadPart bodies)", M)
    s3_bytes_received: float | None = figure("B (GetObject bodies)", M)
    s3_requests: NodeS3Requests | None  # null: no S3 request in the span (see unknown)
    fuse_mounts: dict[str, NodeFuseMount]  # per mount point: its queue and daemon; empty: none (see unknown)
    unknown: dict[str, str]  # a null figure's name → why it is null

    @classmethod
    def from_plain(cls, d: dict) -> NodeNetwork:
        s3 = d["s3_requests"]
        return cls(
            **{
                **d,
                "interfaces": {i: NodeInterface(**f) for i, f in d["interfaces"].items()},
                "nfs_mounts": {m: NodeNfsMount(**f) for m, f in d["nfs_mounts"].items()},
                "s3_requests": s3 and NodeS3Requests(**s3),
                "fuse_mounts": {m: NodeFuseMount(**f) for m, f in d["fuse_mounts"].items()},
            }
        )


@dataclass(frozen=True, kw_only=True)
class NodeFigures(Model):
    """One node's figures for one checkpoint (its windows: one per rank, usually)."""

    windows: int
    ranks: list[int]
    start_wall_ns: float | None = figure(WALL_NS, D)
    end_wall_ns: float | None = figure(WALL_NS, D)
    # when the node's last call to save returned (an async save's call, not its write): the end of
    # the training's wait on this node; null where a window no call timed (found from files or
    # bursts) or an unfinished one leaves it unknown
    blocked_end_wall_ns: float | None = figure(WALL_NS, D)
    seconds: float | None = figure("s", D)
    durable_s: float | None = figure("s (first start to last durable end)", D)
    bytes_app: float | None = figure("B", M)
    bytes_device: float | None = figure("B (the node's devices over its span)", D)
    device_gib_per_s: float | None = figure("GiB/s", D)
    device_unknown: list[dict]  # the unknown-device entries, each with its reason
    app_gib_per_s: float | None = figure("GiB/s", D)
    energy_j: float | None = figure("J", WORST)
    energy_by_component_j: dict[str, float | None] = figure("J", "each component's own")
    energy_basis: str | None
    energy_provenance: list[str]
    slowest_device: NodeSlowDevice | None
    last_rank: LastRank | None
    network: NodeNetwork

    @classmethod
    def from_plain(cls, d: dict) -> NodeFigures:
        """Back from its JSON form (a host's summary.json), field by field: model_base's generic
        parse took ~0.5 ms a node and checkpoint (a 2,048-host job of 12 saves: ~14 s), this µs.
        A key the model does not know is refused (TypeError), as from_jsonable refuses it."""
        sd, lr = d["slowest_device"], d["last_rank"]
        return cls(
            **{
                **d,
                "slowest_device": sd and NodeSlowDevice(**sd),
                "last_rank": lr and LastRank(**lr),
                "network": NodeNetwork.from_plain(d["network"]),
            }
        )


@dataclass(frozen=True, kw_only=True)
class NodeInCheckpoint(NodeFigures):
    """A node's figures as the job's checkpoint lists them: with its start after the first node's."""

    start_offset_s: float | None = figure("s (after the checkpoint's first start on any node)", D)


@dataclass(frozen=True, kw_only=True)
class SlowestDevice(Model):
    """The slowest carrying device on the checkpoint's slowest node."""

    host: str
    device: str
    gib_per_s: float | None = figure("GiB/s", D)
    bytes: float | None = figure("B", D)
    of_devices: int


@dataclass(frozen=True, kw_only=True)
class HeldUpBy(Model):
    """Who the checkpoint waited for: the host whose part ended last, its rank that returned last."""

    host: str
    rank: int | None
    seconds: float | None = figure("s (that rank's save, start to return)", M)
    bytes_app: float | None = figure("B (that rank's files)", M)
    device: str | None  # the slowest carrying device on that host


@dataclass(frozen=True, kw_only=True)
class HostSeries(Model):
    """One host's device bytes in wall-clock bins of `bin_s` (analysis/job_throughput.py)."""

    bin_s: int = figure("s (each bin's width, wall clock, aligned to the Unix epoch)", D)
    first_bin: int  # the first bin's number: it starts at first_bin × bin_s s since the epoch
    write_bytes: list[int] = figure("B per bin (block counters)", M)
    read_bytes: list[int] = figure("B per bin (block counters)", M)


@dataclass(frozen=True, kw_only=True)
class HostPart(Model):
    """What the job's report needs from one host (analysis/job_hosts.py), a few kilobytes whatever
    the recording's size; also what its summary.json holds (analysis/host_summary.py)."""

    name: str
    report: dict  # the host's own report (analysis.analyze), without its `fields`
    start_wall_ns: float = figure(WALL_NS, D)
    end_wall_ns: float = figure(WALL_NS, D)
    figures: dict[tuple, NodeFigures]  # (kind, step) → this node's figures for that checkpoint
    saves_energy_j: float | None = figure("J (over the union of its saves' spans)", WORST)
    throughput: HostSeries | None
    analysis: Any = None  # the whole Analysis, kept for plots (a few hosts); never in a summary


@dataclass(frozen=True, kw_only=True)
class JobCheckpoint(Model):
    """One checkpoint (kind, step) across the job's nodes."""

    kind: str
    step: int | str | None
    hosts: int
    missing_hosts: list[str]
    unfinished_hosts: list[str]
    ranks: int
    start_wall_ns: float = figure(WALL_NS, D)
    stall_s: float | None = figure("s", D)
    slowest_host: str | None
    slowest_host_s: float | None = figure("s", D)
    fastest_host_s: float | None = figure("s", D)
    spread_s: float | None = figure("s", D)
    slowest_device: SlowestDevice | None
    held_up_by: HeldUpBy | None
    bytes_app: float | None = figure("B", M)
    bytes_device: float | None = figure("B (the nodes' sum)", D)
    device_unknown_hosts: list[str]
    app_gib_per_s: float | None = figure("GiB/s (over the span: first start → last end anywhere)", D)
    device_gib_per_s: float | None = figure("GiB/s", D)
    energy_j: float | None = figure("J", WORST)
    energy_hosts: int  # nodes whose joules are known
    # the network, in the checkpoint's direction (sent for a save, received for a load)
    network_bytes: float | None = figure("B (the nodes' interfaces, sent for a save, received for a load)", D)
    network_unknown_hosts: list[str]  # nodes whose interface bytes are unknown (their reasons in per_host)
    network_slowest_host: str | None  # the node with the lowest network GiB/s among those that moved bytes
    network_slowest_host_gib_per_s: float | None = figure("GiB/s (that node's bytes / its seconds)", D)
    per_host: dict[str, NodeInCheckpoint]

    @property
    def label(self) -> str:
        return f"{self.kind} step {self.step}"


@dataclass(frozen=True, kw_only=True)
class JobRun(Model):
    """The whole run's totals over its saves."""

    checkpoints: int
    loads: int
    bytes_app_total: float | None = figure("B", M)
    bytes_device_total: float | None = figure("B", M)
    energy_j_total: float | None = figure("J", WORST)
    blocked_s: float | None = figure("s", D)
    blocked_share: float | None = figure("fraction", D)
    mean_stall_s: float | None = figure("s", D)
    max_stall_s: float | None = figure("s", D)
    max_spread_s: float | None = figure("s", D)
    slowest_host_counts: dict[str, int]  # host → saves it was the slowest in


@dataclass(frozen=True, kw_only=True)
class JobThroughput(Model):
    """The whole job's device writes and reads over time (analysis/job_throughput.py)."""

    bin_s: int = figure("s (each bin's width, wall clock, aligned to the Unix epoch)", D)
    start_wall_ns: int = figure(WALL_NS, D)
    hosts: int
    hosts_without_devices: list[str]
    write_bytes: list[int] = figure("B per bin, summed over hosts (block counters)", M)
    read_bytes: list[int] = figure("B per bin, summed over hosts (block counters)", M)
    write_bytes_total: int = figure("B", M)
    read_bytes_total: int = figure("B", M)
    peak_write_gib_per_s: float = figure("GiB/s over one bin", D)
    peak_read_gib_per_s: float = figure("GiB/s over one bin", D)


@dataclass(frozen=True, kw_only=True)
class JobSummary(Model):
    """The report's `job` part."""

    path: str
    id: str | None
    hosts: list[str]
    hosts_left_out: list[str]
    start_wall_ns: float = figure(WALL_NS, D)
    wall_s: float = figure("s", D)
    run: JobRun | None
    checkpoints: list[JobCheckpoint]
    throughput: JobThroughput | None
    problems: list[str]  # the job reader's own (recording/job.py)


@dataclass(frozen=True, kw_only=True)
class JobReport(Model):
    schema: str
    schema_version: int
    ckprof_version: str
    job: JobSummary
    hosts: dict[str, dict]  # each host's own report (analysis.analyze), without its `fields`
    notes: list[Note]  # each note's code in the model, its text in the JSON (analysis/job_notes.py)
    fields: dict[str, dict]


def job_fields() -> dict[str, dict]:
    """The job's entries of the report's `fields` table, made from the model. A node's figures
    are keyed `per_host.{host}` there (schema 1), where model_base writes a map's values `.*`."""
    return {k.replace(".per_host.*.", ".per_host.{host}."): v for k, v in field_table(JobSummary, "job.").items()}
