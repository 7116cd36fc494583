"""One checkpoint per save or restore (ckprof.analysis.grouping): the phase rules on hand-made
windows shaped like the recorder's (the real-frameworks tier runs them on real saves)."""

from ckprof.analysis.grouping import group_saves
from ckprof.analysis.records import Window

S = 1_000_000_000


def win(wid, kind, pid, start_s, end_s, path, name="torch.load", rank=None, step=None):
    return Window(
        id=wid, kind=kind, source="patch", pid=pid, rank=rank, step=step,
        name=name, path=path, start_ns=int(start_s * S), app_end_ns=int(end_s * S),
        ok=True, bytes_app=100.0,
    )  # fmt: skip


def test_a_slow_rank_joins_its_step_and_a_later_reload_is_a_restore_of_its_own():
    wins = [
        # two ranks load step 7 at once; rank 1 is slow and ends 5 s after rank 0
        win("r0", "load", 10, 0.0, 1.0, "/ck/step_7/rank0.pt", rank=0),
        win("r1", "load", 11, 0.05, 6.0, "/ck/step_7/rank1.pt", rank=1),
        # the same step loaded again, by new processes, well after the first restore ended
        win("r0b", "load", 20, 20.0, 21.0, "/ck/step_7/rank0.pt", rank=0),
        win("r1b", "load", 21, 20.02, 21.1, "/ck/step_7/rank1.pt", rank=1),
    ]
    first, second = group_saves(wins)
    assert [p.id for p in first.parts] == ["r0", "r1"]
    assert (first.start_ns, first.app_end_ns) == (0, 6 * S)  # first start → the slow rank's return
    assert [p.id for p in second.parts] == ["r0b", "r1b"]


def test_one_process_loads_of_one_step_spread_over_its_start_up_are_one_restore():
    # HF's resume: model, then (seconds later, after building the optimizer) optimizer, scheduler, rng
    base = "/out/checkpoint-500"
    wins = [
        win("m", "load", 5, 0.0, 0.5, f"{base}/model.safetensors", name="safetensors.torch.load_file"),
        win("o", "load", 5, 8.0, 8.4, f"{base}/optimizer.pt"),
        win("s", "load", 5, 8.5, 8.6, f"{base}/scheduler.pt"),
        win("g", "load", 5, 12.0, 12.1, f"{base}/rng_state.pth"),
    ]
    (restore,) = group_saves(wins)
    assert len(restore.parts) == 4 and restore.step == 500
    # two saves of the same step name from one process with training between them stay two
    saves = [
        win("a", "save", 5, 0.0, 0.5, f"{base}/model.safetensors", name="torch.save"),
        win("b", "save", 5, 30.0, 30.5, f"{base}/model.safetensors", name="torch.save"),
    ]
    assert len(group_saves(saves)) == 2


def test_a_file_saved_again_by_the_same_call_is_the_next_save():
    # a loop saving latest.pt every 0.3 s: no step, same folder; each call is one save
    wins = [win(f"w{i}", "save", 7, i * 0.3, i * 0.3 + 0.1, "/ck/latest.pt", name="torch.save") for i in range(4)]
    assert len(group_saves(wins)) == 4
