"""What a workload run was asked to do (everything but the plan)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class RunConfig:
    target: str
    count: int = 1
    interval_s: float = 0.0
    compute: str = "sleep"  # sleep | cpu | gpu
    direct: bool = False
    fsync: bool = True
    chunk_bytes: int = 4 * 2**20
    threads: int = 1
    async_: bool = False
    keep: int = 0
    load: bool = False
    drop_caches: bool = False
    warm: bool = False  # a load reads what the page cache holds (no eviction of its files first)
    record: bool = True
    output: str | None = None
    sample_interval_s: float = 0.1
    force: bool = False

    @property
    def has_compute_phases(self) -> bool:
        """A compute phase runs between checkpoints: more than one, some seconds apart."""
        return self.count > 1 and self.interval_s > 0

    def to_dict(self) -> dict:
        return asdict(self)
