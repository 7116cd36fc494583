"""ckprof: storage telemetry and power profiler for AI-training checkpoint workloads.

import ckprof
with ckprof.checkpoint(step=10, path="/ckpt/step10"):   # marks a window in `ckprof record`
    torch.save(state, "/ckpt/step10/model.pt")
rec = ckprof.load("ckprof-20261121-120000")               # read a recording anywhere
rec.block()                                               # derived rates per device
"""

from ckprof.record.markers import checkpoint, mark, step

from .errors import CkprofError, RecordingError, UsageError
from .version import VERSION as __version__


def evict(path: str) -> dict:
    """Drop a checkpoint's files (a file or a folder) from the page cache, nothing else, so the
    next load of it reads from the device: a cold restore without root (ckprof.record.pagecache)."""
    from ckprof.record.pagecache import evict as _evict

    return _evict(path)


def load(path: str):
    """Read a recording directory (see docs/recording-format.md) into a Recording."""
    from ckprof.recording.load import load as _load  # here: `import ckprof` in a training script, no pandas

    return _load(path)


__all__ = ["checkpoint", "mark", "step", "load", "evict", "CkprofError", "RecordingError", "UsageError", "__version__"]
