"""ckprof.workloads: the bundled checkpoint workload generator (issue 3)."""
