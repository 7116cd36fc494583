"""`ckprof.load(path)`: one recording (ckprof.recording.reader), or a job directory of host=<name>/
recordings read as one (ckprof.recording.job)."""

from __future__ import annotations

import os

from .job import Job, is_job_dir
from .reader import Recording, read_meta


def load(path: str) -> Recording | Job:
    """A Recording, or a Job when `path` is a job directory of host=<name>/ recordings."""
    path = os.path.abspath(path)
    if is_job_dir(path):
        return Job(path)
    return Recording(path, read_meta(path))
