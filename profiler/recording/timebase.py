"""A host's two clocks: CLOCK_MONOTONIC, on which every sample and event is stamped, and the wall
clock that lines hosts up. The one place where one becomes the other.

meta.json's `start` anchor is a (monotonic_ns, wall_ns) pair read together (ckprof.record.clock
wall_anchor: a monotonic/wall/monotonic triple, so its uncertainty is known):
    wall_ns = t_ns − anchor.monotonic_ns + anchor.wall_ns
"""

from __future__ import annotations

from dataclasses import dataclass

from ckprof.errors import RecordingError


@dataclass(frozen=True)
class Timebase:
    monotonic_ns: int  # CLOCK_MONOTONIC at the anchor
    wall_ns: int  # Unix ns (CLOCK_REALTIME) at the same instant

    @classmethod
    def from_meta(cls, meta: dict, where: str = "meta.json") -> "Timebase":
        try:
            start = meta["start"]
            return cls(int(start["monotonic_ns"]), int(start["wall_ns"]))
        except (KeyError, TypeError, ValueError):
            raise RecordingError(
                f"{where}: no usable start anchor (start.monotonic_ns and start.wall_ns): "
                "times cannot be put on the wall clock"
            ) from None

    @property
    def offset_ns(self) -> int:
        """What to add to a monotonic time to put it on the wall clock."""
        return self.wall_ns - self.monotonic_ns

    def to_wall_ns(self, t_ns):
        """Monotonic ns (a number, numpy array or pandas Series) → Unix ns on this host's clock."""
        return t_ns + self.offset_ns

    def to_monotonic_ns(self, wall_ns):
        return wall_ns - self.offset_ns
