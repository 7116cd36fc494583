"""A host's two clocks: CLOCK_MONOTONIC, on which every sample and event is stamped, and the wall
clock that lines hosts up. The one place where one becomes the other.

meta.json's `start` anchor is a (monotonic_ns, wall_ns) pair read together (ckprof.record.clock
wall_anchor: a monotonic/wall/monotonic triple, so its uncertainty is known):
    wall_ns = t_ns − anchor.monotonic_ns + anchor.wall_ns
In a job, a host's wall clock is put on the reference host's: `job.clock_offset` holds the offset
measured at record start (and end) by ckprof.record.clockexchange; with both, it is interpolated
linearly over the recording (a clock drifting at a constant rate), with one, it is constant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from ckprof.errors import RecordingError

# A time or times: a number (an int reads as float: drift makes it one), a numpy array, a Series.
Times = TypeVar("Times", float, np.ndarray, pd.Series)


def clock_correction(meta: dict[str, Any]) -> tuple[int, float, str | None]:
    """(offset ns at the start anchor, drift ns per monotonic ns, why not) from `job.clock_offset`."""
    co = (meta.get("job") or {}).get("clock_offset") if isinstance(meta.get("job"), dict) else None
    if not isinstance(co, dict) or co.get("role") != "measured":
        return 0, 0.0, None
    st, en = co.get("start") or {}, co.get("end") or {}
    if "offset_ns" not in st:
        return 0, 0.0, st.get("error") or "no clock offset measured at start"
    try:
        s_off, s_at = int(st["offset_ns"]), int(st["at_wall_ns"])
        if "offset_ns" in en and int(en["at_wall_ns"]) > s_at:
            slope = (int(en["offset_ns"]) - s_off) / (int(en["at_wall_ns"]) - s_at)
            start_wall = int(meta["start"]["wall_ns"])
            return int(s_off + slope * (start_wall - s_at)), slope, None
        return s_off, 0.0, None
    except (KeyError, TypeError, ValueError):
        return 0, 0.0, "job.clock_offset is damaged"


@dataclass(frozen=True)
class Timebase:
    monotonic_ns: int  # CLOCK_MONOTONIC at the anchor
    wall_ns: int  # Unix ns (CLOCK_REALTIME) at the same instant, on the job's reference clock when measured
    drift: float = 0.0  # the clock offset's change per monotonic ns (from job.clock_offset start and end)

    @classmethod
    def from_meta(cls, meta: dict[str, Any], where: str = "meta.json") -> "Timebase":
        try:
            start = meta["start"]
            mono, wall = int(start["monotonic_ns"]), int(start["wall_ns"])
        except (KeyError, TypeError, ValueError):
            raise RecordingError(
                f"{where}: no usable start anchor (start.monotonic_ns and start.wall_ns): "
                "times cannot be put on the wall clock"
            ) from None
        offset, drift, _ = clock_correction(meta)
        return cls(mono, wall + offset, drift)

    @property
    def offset_ns(self) -> int:
        """What to add to a monotonic time to put it on the wall clock."""
        return self.wall_ns - self.monotonic_ns

    def to_wall_ns(self, t_ns: Times) -> Times:
        """Monotonic ns (a number, numpy array or pandas Series) → Unix ns on this host's clock
        (the job's reference clock where its offset was measured)."""
        if self.drift:
            return t_ns + self.offset_ns + (t_ns - self.monotonic_ns) * self.drift
        return t_ns + self.offset_ns

    def to_monotonic_ns(self, wall_ns: Times) -> Times:
        if self.drift:
            return (wall_ns - self.offset_ns + self.monotonic_ns * self.drift) / (1 + self.drift)
        return wall_ns - self.offset_ns
