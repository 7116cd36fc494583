"""Checkpoint sizing against MLPerf Storage v2.0's reference figures (DLIO base_checkpointing.py)."""

import re

import pytest
from support.command import ckprof_cmd

from ckprof.errors import UsageError
from ckprof.workloads.model import PRESETS, Shape, layer_range
from ckprof.workloads.plan import ALIGN, make_plan


def test_llama3_8b_matches_mlperf():
    p = PRESETS["llama3-8b"]
    assert p.shape.num_parameters() == 8_030_261_248
    plan = make_plan(p)
    assert plan.nranks == 8
    assert plan.nfiles == 16
    assert {r.nbytes for r in plan.ranks} == {14_053_202_944}
    assert plan.nbytes == 112_425_623_552


def test_llama3_405b_matches_mlperf():
    plan = make_plan(PRESETS["llama3-405b"])
    assert plan.nranks == 512
    assert plan.nfiles == 1544
    assert plan.nbytes == 5_682_508_791_808
    # ZeRO-1: only data-parallel rank 0 (ranks 0..255) writes model layers; every rank its optimizer.
    assert all(len(r.files) == 1 and r.files[0].kind == "optimizer" for r in plan.ranks[256:])
    assert {f.name for f in plan.ranks[0].files} >= {
        "layer_0-model_0_model_states.pt",
        "zero_pp_rank_0_mp_rank_0_optim_states.pt",
    }


def test_layers_cover_every_index_once():
    L, pp = 126, 32
    seen = []
    for stage in range(pp):
        a, b = layer_range(stage, pp, L)
        seen += range(a, b + 1)
    assert seen == list(range(0, L + 3))


def test_subset_is_first_ranks_of_full_layout():
    full = make_plan(PRESETS["llama3-405b"])
    sub = make_plan(PRESETS["llama3-405b"], subset=True)
    assert sub.nranks == 8 and sub.world == 512
    assert [r.files for r in sub.ranks] == [r.files for r in full.ranks[:8]]


def test_ranks_sets_data_parallelism_and_keeps_total_under_zero3():
    two = make_plan(PRESETS["llama3-8b"], ranks=2)
    assert two.nranks == 2 and two.nfiles == 4
    # ZeRO-3 shards everything over DP: the total stays (up to DLIO's integer floors)
    assert abs(two.nbytes - 112_425_623_552) / 112_425_623_552 < 1e-4


def test_total_size_scales_keeping_structure():
    full = make_plan(PRESETS["llama3-405b"], subset=True)
    small = make_plan(PRESETS["llama3-405b"], subset=True, total_bytes=256 * 2**20)
    assert small.nfiles == full.nfiles and small.nranks == full.nranks
    assert all(f.nbytes % ALIGN == 0 for r in small.ranks for f in r.files)
    assert abs(small.nbytes - 256 * 2**20) / (256 * 2**20) < 0.01
    ratio = [f.nbytes / g.nbytes for r, q in zip(small.ranks, full.ranks) for f, g in zip(r.files, q.files)]
    assert max(ratio) / min(ratio) < 1.01  # every file shrinks by the same factor


def test_custom_shape_and_param_count():
    s = Shape(layers=2, hidden=64, ffn=256, heads=4, kv_heads=2, vocab=1000)
    # embedding+lm_head 2·1000·64, final norm 64, per layer 2·64 + 64·(64+2·32) + 64·64 + 3·64·256
    assert s.num_parameters() == 2 * 64000 + 64 + 2 * (128 + 64 * 128 + 4096 + 3 * 64 * 256)
    flat = Shape(layers=4, flat_params=1000)
    assert flat.num_parameters() == 1000


@pytest.mark.parametrize(
    "kw,msg",
    [
        (dict(scale=0), "--scale must be more than 0"),
        (dict(scale=-1), "--scale must be more than 0"),
        (dict(ranks=12), "not a multiple of TP×PP"),
    ],
)
def test_bad_plans(kw, msg):
    with pytest.raises(UsageError, match=re.escape(msg)):
        make_plan(PRESETS["llama3-70b"], **kw)


def run(*args):
    return ckprof_cmd("workload", *args, in_process=True)


def test_dry_run_prints_plan_with_units():
    r = run("--preset", "llama3-8b", "--dry-run")
    assert r.exit_code == 0, r.output
    assert "8,030,261,248 parameters" in r.output
    assert "14,053,202,944 B" in r.output
    assert "16 files, 112,425,623,552 B (104.70 GiB) per checkpoint over 8 ranks" in r.output
    r = run("--preset", "llama3-405b", "--dry-run")
    assert "1,544 files, 5,682,508,791,808 B" in r.output and "512 ranks" in r.output


@pytest.mark.parametrize(
    "args,msg",
    [
        (["--preset", "llama3-9b"], "unknown preset 'llama3-9b'"),
        (["--scale", "0"], "--scale must be more than 0"),
        (["--scale", "-0.5"], "--scale must be more than 0"),
        (["--preset", "llama3-405b", "--ranks", "100"], "not a multiple of TP×PP"),
        (["--hidden", "64", "--ffn", "128", "--layers", "2", "--heads", "6", "--tp", "4"], "TP=4 does not divide"),
        (["--preset", "llama3-8b", "--pp", "64"], "PP=64 pipeline stages but only 32 layers"),
        (["--params", "abc"], "bad parameter count"),
    ],
)
def test_bad_input_is_one_line_error(args, msg):
    r = run(*args, "--dry-run")
    assert r.exit_code == 2
    assert msg in r.output and "Traceback" not in r.output


def test_the_generator_from_python_with_options_objects(tmp_path):
    """No click: ModelOptions gives the plan `--dry-run` prints; RunConfig is checked before any rank."""
    from ckprof.workloads.config import RunConfig
    from ckprof.workloads.options import ModelOptions, check_run, run

    plan = ModelOptions(preset="llama3-8b").plan()
    assert plan.nranks == 8 and plan.nbytes == 112_425_623_552
    small = ModelOptions(preset="llama3-8b", total_bytes=64 * 2**20).plan()
    assert small.nbytes == pytest.approx(64 * 2**20, rel=0.01)
    assert ModelOptions(params="13B", layers=40).plan().nranks == 1
    with pytest.raises(UsageError, match="--params must be at least 1"):
        ModelOptions(params=0).plan()
    with pytest.raises(UsageError, match="a custom shape needs --ffn, --layers, --heads"):
        ModelOptions(hidden=4096).plan()
    with pytest.raises(UsageError, match="--count must be at least 1"):
        run(ModelOptions(preset="llama3-8b"), RunConfig(target=str(tmp_path), count=0))
    with pytest.raises(UsageError, match="--keep must be 0"):
        check_run(RunConfig(target=str(tmp_path), keep=-1))
    assert list(tmp_path.iterdir()) == []  # nothing started
