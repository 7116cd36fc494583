"""What a workload run was asked to do (everything but the plan)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ckprof.record.options import RecordOptions
from ckprof.recording.mlperf_rules import DEFAULT_EDITION

FILE_CHUNK_BYTES = 4 * 2**20
# an s3:// target's chunk is a multipart upload's part: boto3's part size (s3transfer's
# multipart_chunksize, 8 MiB), as S3 takes no part under 5 MiB but the last
S3_CHUNK_BYTES = 8 * 2**20


def is_s3(target: str | None) -> bool:
    """An s3:// target (ckprof.recording.fstypes.S3_SCHEMES)."""
    from ckprof.recording.fstypes import S3_SCHEMES, url_scheme

    return url_scheme(target) in S3_SCHEMES


@dataclass
class RunConfig:
    target: str
    count: int = 1
    interval_s: float = 0.0
    compute: str = "sleep"  # sleep | cpu | gpu
    direct: bool = False
    fsync: bool = True
    chunk_bytes: int | None = None  # None: the target's default (FILE_CHUNK_BYTES, S3_CHUNK_BYTES)
    threads: int = 1
    async_: bool = False
    keep: int = 0
    load: bool = False
    drop_caches: bool = False
    warm: bool = False  # a load reads what the page cache holds (no eviction of its files first)
    record: bool = True
    # MLPerf Storage's checkpointing rules the run is checked against (ckprof.workloads.rules):
    # v3.0 | v2.0 | none, and the simulated accelerators it declares (Rules.md 4.3.4)
    rules: str = DEFAULT_EDITION
    accelerator_type: str | None = None
    accelerators: int | None = None
    # a load's invocation start, wall clock (None: this process's start): Rules.md 4.7.1's gap
    invoked_unix_ns: int | None = None
    # how the run is recorded (output directory, sampling, --force...): the options `ckprof record` takes
    recording: RecordOptions = field(default_factory=RecordOptions)
    # the checks' results (rules.summary), made before any rank starts: meta.json's workload.rules
    rule_checks: dict | None = None

    def __post_init__(self) -> None:
        if self.chunk_bytes is None:
            self.chunk_bytes = S3_CHUNK_BYTES if is_s3(self.target) else FILE_CHUNK_BYTES

    @property
    def has_compute_phases(self) -> bool:
        """A compute phase runs between checkpoints: more than one, some seconds apart."""
        return self.count > 1 and self.interval_s > 0

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("rule_checks")  # written beside the config, as workload.rules
        return d
