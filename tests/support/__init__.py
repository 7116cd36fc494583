"""Helpers shared by the test tiers (tests/README.md): test modules import from here, never from
each other. Synthetic recordings are built by ckprof.testing (profiler/testing.py)."""
