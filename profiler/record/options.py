"""How a recording is made: the one options object `ckprof record`, `ckprof workload` and
`ckprof workload load` share (issue 23 item 4), from the command line (cli/recording_options.py) or
from Python (`RunConfig(recording=RecordOptions(...))`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the collectors (pyarrow) are imported only by a command that records
    from .sources import SourceOptions


@dataclass(frozen=True)
class RecordOptions:
    """output: the recording's directory (None: ./ckprof-YYYYmmdd-HHMMSS); interval_s: the block and
    host sampling interval, s; nvme_interval_s: NVMe SMART polling, s (one nvme-cli call per
    controller each time); flush_s: how often samples are written to disk, s (what a killed recorder
    can lose); force: replace a recording already there; quiet: no notes or summary on stderr;
    paths: the directories whose disks are recorded (a workload's is its target); devices: block
    devices named by the user (`all`: every disk)."""

    output: str | None = None
    interval_s: float = 0.1
    nvme_interval_s: float = 1.0
    flush_s: float = 5.0
    force: bool = False
    quiet: bool = False
    paths: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()

    def sources(self) -> SourceOptions:
        """What record.sources.build_sources needs of these options."""
        from .sources import SourceOptions

        return SourceOptions(
            paths=list(self.paths),
            devices=list(self.devices),
            interval_s=self.interval_s,
            nvme_interval_s=self.nvme_interval_s,
        )
