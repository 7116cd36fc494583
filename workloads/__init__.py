"""ckprof.workloads: the bundled checkpoint workload generator (`ckprof workload`, docs/workload.md).

model.py (MLPerf Storage v2.0 sizing) → plan.py (ranks, files, scale) → launch.py (checks,
recording, rank processes) → rank.py (checkpoints, compute, load) → shardio.py/data.py (bytes)
→ store.py (partial dir, manifest, atomic publish, keep) → summary.py (the table).
"""
