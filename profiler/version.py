"""ckprof's version: the installed distribution's, or 0.0.0+unknown in a source tree never installed.

A module of its own, below every layer (docs/architecture.md, "Layers"), so the analysis, the
recorder and the stamps can write it without importing the public API (`ckprof/__init__.py`),
which sits on top; `ckprof.__version__` is this value."""

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("ckprof")
except PackageNotFoundError:  # running from a source tree that was not installed
    VERSION = "0.0.0+unknown"
