"""Analysis of a recording (reads recordings only, never hardware): checkpoint windows, their
durable end, bytes, bandwidth, queue depth, energy, temperature, throttling; run-level cost.

    import ckprof
    from . import analyze
    report = analyze(ckprof.load("ckprof-20261121-120000")).report   # docs/report-format.md
"""

from .analyze import REPORT_SCHEMA, REPORT_SCHEMA_VERSION, Analysis, analyze

__all__ = ["analyze", "Analysis", "REPORT_SCHEMA", "REPORT_SCHEMA_VERSION"]
