"""Collectors: one module per source. Each has a root path or binary a test can point elsewhere.

See ckprof.collectors.base for the shape every collector has.
"""
