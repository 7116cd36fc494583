"""Issue 25's D2H check on a lent GPU (run by device_checks.sh after its recordings): per async save,
the staging phase's device-to-host bytes (ckprof's d2h_bytes) against the program's own count of its
CUDA state (examples/train_async_checkpoint.py --truth: save_call's state_cuda_bytes); PASS within ±5 %.

    python3 benchmarks/gpu/d2h_check.py [/tmp]     # reads report-<mode>.json and rec-<mode>/truth.jsonl there
"""

import json
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
for m in ("async", "async-staged"):
    try:
        rep = json.load(open(f"{root}/report-{m}.json"))
        truth = [json.loads(line) for line in open(f"{root}/rec-{m}/truth.jsonl")]
    except OSError as e:
        print(f"{m}: no report or truth ({e})")
        continue
    calls = [f for f in truth if f["ev"] == "save_call"]
    done = {f["step"] for f in truth if f["ev"] == "save_done"}
    saves = [c for c in rep["checkpoints"] if c["kind"] == "save"]
    for i, (call, c) in enumerate(zip(calls, saves)):
        w = call.get("state_cuda_bytes")
        p = next((p for p in c.get("phases", []) if p["name"] == "staging"), {})
        d = p.get("d2h_bytes")
        if call["step"] not in done:  # the save failed in the program: ckprof must state no staging figure
            good = c["ok"] is not True and d is None
            print(
                f"{m} save {i + 1}: failed in the program (no save_done); ckprof ok {c['ok']}, error "
                f"{c.get('error')!r}, d2h_bytes {d}: {'PASS' if good else 'FAIL'} (no figure for a failed save)"
            )
            continue
        ok = d is not None and w and abs(d - w) <= 0.05 * w
        print(
            f"{m} save {i + 1}: d2h_bytes {d} B vs state {w} B: {'PASS' if ok else 'FAIL'} (±5 %); "
            f"d2h_s {p.get('d2h_s')} s, {p.get('d2h_gib_per_s')} GiB/s, staging GPU idle {p.get('gpu_idle_s')} s; "
            f"{p.get('d2h_basis')}"
        )
