"""What a workload run was asked to do (everything but the plan)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ckprof.record.options import RecordOptions

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
    # how the run is recorded (output directory, sampling, --force...): the options `ckprof record` takes
    recording: RecordOptions = field(default_factory=RecordOptions)

    def __post_init__(self) -> None:
        if self.chunk_bytes is None:
            self.chunk_bytes = S3_CHUNK_BYTES if is_s3(self.target) else FILE_CHUNK_BYTES

    @property
    def has_compute_phases(self) -> bool:
        """A compute phase runs between checkpoints: more than one, some seconds apart."""
        return self.count > 1 and self.interval_s > 0

    def to_dict(self) -> dict:
        return asdict(self)
