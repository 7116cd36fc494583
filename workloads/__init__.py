"""The bundled checkpoint workload generator (ckprof workload)."""
