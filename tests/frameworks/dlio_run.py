"""Real DLIO (dlio_benchmark) as tests/frameworks/test_dlio.py and benchmarks/workload_vs_dlio.py run
it: its workload YAML for a transformer shape, its one-line fsync fix on a copy of the installed
package, the mpirun command, and its own per-rank timer of each save.

The fsync bug (DLIO at its pinned commit e1919d7b, and v2.0.1): dlio_benchmark/utils/config.py
LoadConfig stores the workload's `checkpoint.fsync` as `args.checkpoint_sync`; the savers read
`args.checkpoint_fsync` (checkpointing/base_checkpointing.py save_checkpoint →
pytorch_checkpointing.py save_state, `if fsync: os.fsync(f.fileno())`), which keeps its default,
False. The fix renames the one assignment; it is applied to a copy put first on PYTHONPATH, never to
the installed package.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

ARCHIVE = Path(__file__).resolve().parent / "dlio_benchmark-2.0.0-e1919d7b.tar.gz"
INSTALL = (
    f"pip install -e '.[dlio]' torch==2.13.0 && pip install --no-deps tests/frameworks/{ARCHIVE.name} (.ci/run does)"
)
BUG_LINE = "args.checkpoint_sync = config['checkpoint']['fsync']"
FIX_LINE = "args.checkpoint_fsync = config['checkpoint']['fsync']"
NEEDS = ("torch", "hydra", "omegaconf", "mpi4py", "dftracer")  # what its checkpoint path imports
WORKLOAD_NAME = "llama3_8b_scaled"


def package() -> tuple[Path | None, str]:
    """(the installed dlio_benchmark package's directory, "") or (None, why it cannot be run here:
    what is missing, or a DLIO without the checkpoint fsync this bug is about)."""
    for m in NEEDS:
        if importlib.util.find_spec(m) is None:
            return None, f"{m} is not installed (DLIO needs it): {INSTALL}"
    spec = importlib.util.find_spec("dlio_benchmark")
    if spec is None or not spec.submodule_search_locations:
        return None, f"dlio_benchmark is not installed: {INSTALL}"
    if not script().exists():
        return None, f"no dlio_benchmark script beside {sys.executable}: {INSTALL}"
    pkg = Path(list(spec.submodule_search_locations)[0])
    if "checkpoint_fsync" not in (pkg / "utils" / "config.py").read_text():
        return None, f"this dlio_benchmark ({pkg}) has no checkpoint fsync (the index's 2.0.0 predates it): {INSTALL}"
    return pkg, ""


def has_bug(pkg: Path) -> bool:
    """The installed config.py assigns `checkpoint.fsync` to the unread name, once."""
    return (pkg / "utils" / "config.py").read_text().count(BUG_LINE) == 1


def package_for_test() -> Path:
    """The installed DLIO for a test: skipped (with why) where DLIO or mpirun is absent; failed
    where DLIO no longer has the bug the tests fix (it changed: revisit them)."""
    import pytest
    from support.system import need_binary

    pkg, why = package()
    if pkg is None:
        pytest.skip(why)
    need_binary("mpirun")
    if not has_bug(pkg):
        pytest.fail(f"{pkg}/utils/config.py no longer has {BUG_LINE!r} once: DLIO changed; revisit this test")
    return pkg


def script() -> Path:
    """DLIO's console script beside this interpreter (pip installed it with the package)."""
    return Path(sys.executable).parent / "dlio_benchmark"


def fixed_copy(pkg: Path, where: Path) -> Path:
    """A copy of the installed package with the one-line fix, in `where` (to put on PYTHONPATH)."""
    dst = where / "dlio_benchmark"
    shutil.copytree(pkg, dst, ignore=shutil.ignore_patterns("__pycache__"))
    cfg = dst / "utils" / "config.py"
    cfg.write_text(cfg.read_text().replace(BUG_LINE, FIX_LINE))
    return where


def use_fixed_copy(pkg: Path, where: Path, env: dict) -> None:
    """Put the fixed copy first on `env`'s PYTHONPATH and check that DLIO's processes (the same
    interpreter, the same environment) import it, not the installed package."""
    env["PYTHONPATH"] = str(fixed_copy(pkg, where))
    probe = "import dlio_benchmark.utils.config as c; print(c.__file__)"
    used = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert used.stdout.strip().startswith(env["PYTHONPATH"]), (used.stdout, used.stderr[-2000:])


def write_workload(
    conf: Path, shape: dict[str, int], folder: Path, saves: int, between_s: float, fsync: bool = True
) -> None:
    """DLIO's workload YAML under `conf`/workload/ (hydra's --config-dir): MLPerf Storage's
    llama3_8b.yaml layout (fp16 model, fp32 optimizer, ZeRO-3, TP = PP = 1) with `shape`'s layers,
    hidden, ffn, heads, kv_heads and vocab, `saves` checkpoint writes `between_s` apart, no reads."""
    (conf / "workload").mkdir(parents=True, exist_ok=True)
    (conf / "workload" / f"{WORKLOAD_NAME}.yaml").write_text(
        f"""\
model:
  name: {WORKLOAD_NAME}
  type: transformer
  num_layers: {shape["layers"]}
  model_datatype: fp16
  optimizer_datatype: fp32
  parallelism: {{pipeline: 1, tensor: 1, zero_stage: 3}}
  transformer:
    vocab_size: {shape["vocab"]}
    hidden_size: {shape["hidden"]}
    ffn_hidden_size: {shape["ffn"]}
    num_attention_heads: {shape["heads"]}
    num_kv_heads: {shape["kv_heads"]}
framework: pytorch
workflow: {{generate_data: False, train: False, checkpoint: True}}
checkpoint:
  checkpoint_folder: {folder}
  time_between_checkpoints: {between_s}
  num_checkpoints_write: {saves}
  num_checkpoints_read: 0
  fsync: {fsync}
"""
    )


def command(conf: Path, out: Path, ranks: int) -> list[str]:
    """mpirun of DLIO on `ranks` local processes (as root, more ranks than cores allowed), its
    outputs (per-rank stats, summary) in `out`. Run it with a cwd outside the recorded --path:
    hydra writes ./hydra_log."""
    return ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ranks), str(script()),
            "--config-dir", str(conf), f"workload={WORKLOAD_NAME}", f"++workload.output.folder={out}"]  # fmt: skip


def wall_s(stamp: str) -> float:
    """A DLIO stamp (utility.utcnow(): datetime.now(), local time, µs) as Unix seconds."""
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%f").timestamp()


def timed_saves(out: Path, ranks: int) -> list[tuple[float, float]]:
    """Each save as DLIO timed it (statscounter start_save_ckpt/end_save_ckpt, per rank, in
    {rank}_per_epoch_stats.json): (first rank's start, last rank's end), Unix seconds."""
    stats = [json.loads((out / f"{k}_per_epoch_stats.json").read_text())["1"] for k in range(ranks)]
    n = sum(1 for key in stats[0] if key.startswith("save_ckpt"))
    return [
        (min(wall_s(s[f"save_ckpt{i}"]["start"]) for s in stats), max(wall_s(s[f"save_ckpt{i}"]["end"]) for s in stats))
        for i in range(1, n + 1)
    ]
