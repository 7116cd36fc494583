"""Megatron-core dist_checkpointing (async torch_dist, 2 gloo ranks on CPU) under `ckprof record`,
on ext4 on a direct-io loop device (root, slow): the real-stacks tier of issue 21.

Megatron's async save forks a writer per rank, which forks one process per write bucket; those
torch.save each tensor into their .distcp stream and fsync it, and rank 0's finalization writes
.metadata and metadata.json. Before file-level saves this was 29 windows per save, 87 for 3, each
covering 1-4 % of its save. The test asks, from `ckprof report --format json`:

  * one save checkpoint per save (3, whatever the ranks and writer processes);
  * each save covered ≥ 95 % by one window: the save measured by the script is the union of its
    ranks' save() → blocking finalization (first rank's start → last rank's end);
  * each checkpoint's bytes_app equal to the bytes of its files on disk, exactly (counted once);
  * its writers[] name the processes that wrote the .distcp files — the forked writers, not (only)
    the ranks — each with its pid, comm and bytes, and their bytes add up to the checkpoint's;
and every figure of the frameworks tier (tests/frameworks/test_frameworks.py check_figures).
Twice: with the patch (dist_checkpointing.save wrapped: the window starts at the call), and with
--no-patch (the kernel's file activity alone: no code in the writer).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from support.frameworks import check_figures, need, record_script

pytestmark = [pytest.mark.root, pytest.mark.slow]

INSTALL = "pip install -e '.[frameworks]' torch==2.13.0 (.ci/run does)"


@pytest.mark.parametrize("patch", ["patched", "no-patch"])
def test_megatron_async_dist_checkpointing(loop_ext4, tmp_path, patch):
    need("torch")
    pytest.importorskip("megatron.core.dist_checkpointing", reason=f"megatron-core is not installed: {INSTALL}")
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch has no torch.distributed with gloo")
    torchrun = Path(sys.executable).parent / "torchrun"
    launcher = [str(torchrun), "--standalone", "--nproc-per-node", "2"] if torchrun.exists() else None
    # no-patch: the kernel's file activity alone (no code in the writer, no call wrapped)
    opts = ["--no-patch"] if patch == "no-patch" else []
    run = record_script(loop_ext4, tmp_path, "megatron_save.py", name="megatron", launcher=launcher, record_opts=opts)
    # 2 ranks × 3 steps: 3 checkpoints. Without the patch no call is known, so a save starts at its
    # first file creation: the iteration folder rank 0 makes before the barrier and the timed call
    failed = check_figures(run, expect_saves=6, durable_check=False, lead_from_prep=patch == "no-patch")

    saves = run.saves["saves"]
    anchor = int(run.rec.meta["start"]["monotonic_ns"])
    cps = [c for c in run.rep["checkpoints"] if c["kind"] == "save" and c["ok"] is not False]
    for c in cps:
        # the checkpoint's step folder, and what the script measured of that save
        paths = {c["path"], *(p["path"] for p in c.get("parts") or [])} - {None}
        step_dirs = {s["path"] for s in saves if any(p == s["path"] or p.startswith(s["path"] + os.sep) for p in paths)}
        files = {p: n for p, n in run.saves["files"].items() if any(p.startswith(d + os.sep) for d in step_dirs)}
        ranks = [s for s in saves if s["path"] in step_dirs]
        a, b = min(s["start_ns"] for s in ranks), max(s["end_ns"] for s in ranks)  # the union of its ranks
        wa, wb = anchor + c["start_s"] * 1e9, anchor + (c["app_end_s"] or c["start_s"]) * 1e9
        cover = max(0.0, min(b, wb) - max(a, wa)) / (b - a)
        writers = c.get("writers") or []
        distcp = sorted(n for p, n in files.items() if p.endswith(".distcp"))
        distcp_writers = sorted(w["bytes"] for w in writers if w["comm"] and w["files"] == 1 and w["bytes"] in distcp)
        print(
            f"  {c['id']} {sorted(step_dirs)}: {(b - a) / 1e6:.1f} ms (ranks' union) covered {100 * cover:.1f} %; "
            f"bytes_app {c['bytes_app']} / on disk {sum(files.values())} in {len(files)} files; "
            f"writers {[(w['pid'], w['ppid'], w['comm'], w['files'], w['bytes']) for w in writers]}"
        )
        if len(step_dirs) != 1 or c["bytes_app"] != sum(files.values()):
            failed.append(
                f"{c['id']}: bytes_app {c['bytes_app']} for {sorted(step_dirs)} holding {sum(files.values())} B"
            )
            _print_entries(run, step_dirs)
        if cover < 0.95:
            failed.append(f"{c['id']}: covers {100 * cover:.1f} % of its save (the ranks' union)")
        wb_sum = sum(w["bytes"] or 0 for w in writers)
        if not writers or wb_sum != c["bytes_app"] or any(w["bytes"] is None for w in writers):
            failed.append(f"{c['id']}: writers' bytes {wb_sum} (some unknown: {writers}) ≠ {c['bytes_app']}")
        # 2 ranks × 2 write buckets: each .distcp file written by a forked process of its own, named
        if distcp_writers != distcp or len(distcp) != 4:
            failed.append(f"{c['id']}: .distcp files {distcp}, named writers of one each {distcp_writers}")
    if len(cps) != 3:
        failed.append(f"{len(cps)} save checkpoints, 3 saves")
    assert not failed, failed


def _print_entries(run, step_dirs) -> None:
    """What the reader said of each file under the save's folders (the entries its bytes come from):
    a failure's evidence, for the person reading the log."""
    ev = run.rec.events
    keep = ("ops", "start_ns", "end_ns", "size_bytes", "size_unknown", "renamed_from", "writers", "found_by")
    for files in ev.loc[ev["event"] == "file_activity", "files"]:
        for f in files:
            if any(str(f.get("path")).startswith(d) for d in step_dirs):
                print("    entry", f.get("path"), {k: f.get(k) for k in keep if f.get(k) is not None})
