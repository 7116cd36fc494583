"""MLPerf Storage's checkpointing rules: their numbers and wording, in one place for both sides —
the workload that checks a run before it starts (ckprof.workloads.rules) and the audit of a
recorded run (ckprof.analysis.audit), which may not import each other (docs/architecture.md,
Layers).

Source: mlcommons/storage Rules.md, section 4 "Validating the Checkpointing Workloads" (the v3.0
round's rules, kept as they are for v4.0: its Table 2 note says so), and for v2.0 the round's
Submission_guidelines.md §2.2 "Checkpointing". The rule numbers below (4.3.1 ...) are Rules.md's.
"""

from __future__ import annotations

from dataclasses import dataclass

V3 = "v3.0"
V2 = "v2.0"
NONE = "none"
EDITIONS = (V3, V2, NONE)
DEFAULT_EDITION = V3

RULES_SOURCE = {
    V3: "mlcommons/storage Rules.md §4, Validating the Checkpointing Workloads: the v3.0 round",
    V2: "mlcommons/storage Submission_guidelines.md §2.2, Checkpointing: the v2.0 round",
}

# Rules.md Table 2 (and 4.3.3 checkpointModelConfigurationReq: "one of the four model
# configurations"): the models, as ckprof's presets (ckprof.workloads.model.PRESETS) size them.
MODELS = ("llama3-8b", "llama3-70b", "llama3-405b", "llama3-1t")

# Rules.md 4.3.5 checkpointSubsetRunValidation: "A subset run must use the "8B" model and a total
# of exactly 8 accelerators" (Table 2: "Subset: 8-Process Size ... Invalid" for 70B, 405B, 1T).
# v2.0 (Submission_guidelines.md §2.2.2, "subset ... Intended for node local storage systems",
# and mlcommons/storage#141: "the 8B model does not support subset mode as it is already set to 8
# processes") allowed it for the three larger models only.
SUBSET_MODELS = {V3: ("llama3-8b",), V2: ("llama3-70b", "llama3-405b", "llama3-1t")}
SUBSET_ACCELERATORS = 8  # 4.3.5 "exactly 8"; mlpstorage/config.py LLM_SUBSET_PROCS = 8


@dataclass(frozen=True)
class Accelerator:
    name: str
    memory_gb: int  # Rules.md Table 3 "Memory (GB)"
    whatif: bool = False  # "whatif only": allowed for exploring, never a CLOSED or OPEN result


# Rules.md 4.3.4 checkpointAggregateAcceleratorMemory, Table 3 "Simulated accelerator memory":
# b200 180 GB and mi355 288 GB (CLOSED, OPEN); h100 and a100 80 GB, "whatif only".
# v2.0 had no table: its guidelines say only that "the aggregate GPU memory across all nodes must
# be sufficient to accommodate the model's checkpoint size" (§2.2.1), its emulated accelerators
# were h100 and a100 (mlpstorage/config.py ACCELERATORS), and its checker took 80 GB (an H100).
ACCELERATORS = {
    V3: {
        "b200": Accelerator("b200", 180),
        "mi355": Accelerator("mi355", 288),
        "h100": Accelerator("h100", 80, whatif=True),
        "a100": Accelerator("a100", 80, whatif=True),
    },
    V2: {"h100": Accelerator("h100", 80), "a100": Accelerator("a100", 80)},
}
# Table 3's GB is compared with Table 2's checkpoint sizes, which (its Units note) are binary
# units labelled GB: the comparison is in GiB, as the checker's is (checkpoint_size_GB, GiB).
ACCELERATOR_GB_BYTES = 2**30

# Rules.md §4.6 Table 3, --num-checkpoints-write / --num-checkpoints-read: "Only 10 or 0", 0 only
# in the two-invocation workflow of 4.7.1, "the total work performed across both invocations must
# still be 10 writes followed by 10 reads". v2.0: the same 10 and 10 (its Table 3, "10 or -1").
CHECKPOINTS_WRITTEN = 10
CHECKPOINTS_READ = 10

# Rules.md 4.3.1 checkpointDataSizeRatio: "The checkpoint data written per client node must be more
# than 3x the client node's memory capacity, otherwise the filesystem cache needs to be cleared
# between the write and read phases" (the checker compares one checkpoint's size per host,
# checkpoint_size_GB / num_hosts, with 3 × host memory). v2.0 (Submission_guidelines.md §2.2.2):
# "first perform the checkpoint write, then clear the cache, and finally perform the checkpoint
# read": always, no exemption (None).
CACHE_EXEMPT_MEMORY_RATIO_V3 = 3
CACHE_EXEMPT_MEMORY_RATIO = {V3: CACHE_EXEMPT_MEMORY_RATIO_V3, V2: None}

# Rules.md 4.7.1 checkpointCacheFlushValidation: in the two-invocation workflow the read
# invocation must start "within 30 seconds of the write-phase invocation ending"; the gap is
# read.invocation_start_time − write.summary.end_time, and "A negative gap indicates clock skew
# between the write and read nodes and is reported as such rather than as a causality violation".
# A single invocation (write then read) has no gap check. v2.0 had no such rule (None).
READ_AFTER_WRITE_MAX_GAP_S_V3 = 30.0
READ_AFTER_WRITE_MAX_GAP_S = {V3: READ_AFTER_WRITE_MAX_GAP_S_V3, V2: None}

# Rules.md 4.3.2 checkpointFsyncVerification: "an fsync call at the end of each of the 10
# checkpoint writes"; v2.0 §2.2.2 "We enforce fsync to be applied during checkpoint writes".

# Each rule: Rules.md's number, its name there, and what it asks, in a few words.
RULES = {
    "4.3.3": ("checkpointModelConfigurationReq", "one of the four models (Table 2)"),
    "4.3.5": ("checkpointSubsetRunValidation", "subset runs: which model, 8 accelerators"),
    "4.3.4": ("checkpointAggregateAcceleratorMemory", "accelerator memory × count holds the checkpoint"),
    "4.3.2": ("checkpointFsyncVerification", "fsync at the end of each checkpoint write"),
    "4.6.3": ("checkpointCounts", "10 writes, then 10 reads"),
    "4.3.1": ("checkpointDataSizeRatio", "cache cleared between write and read (v3.0: unless data > 3× memory)"),
    "4.7.1": ("checkpointCacheFlushValidation", "read invocation starts soon after the write (v3.0: within 30 s)"),
}
