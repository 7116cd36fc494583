"""Real DLIO (dlio_benchmark) checkpointing under `ckprof record`, as released and with its fsync
key fixed (issue 26), on ext4 over a direct-io loop device (root, slow).

DLIO is installed from tests/frameworks/dlio_benchmark-2.0.0-e1919d7b.tar.gz: `git archive` of
argonne-lcf/dlio_benchmark at e1919d7b6ccffbe15143cd616517da9e5d7b26a7 (its head of 2026-06-17;
setup.py still says 2.0.0), the package, setup.py, pyproject.toml, LICENSE (Apache-2.0), README.md
and MANIFEST.in. The package index's only dlio_benchmark is 2.0.0 of 2024, from before DLIO had a
checkpoint fsync at all. .ci/run installs the archive `--no-deps` beside CPU torch, with the
`dlio` extra (mpi4py on Debian's OpenMPI, hydra-core, omegaconf, pydftracer).

The bug: DLIO stores the workload's `checkpoint.fsync` under a name its savers never read, so
`fsync: True` never fsyncs. dlio_run.py (shared with benchmarks/workload_vs_dlio.py) names the line
and applies the one-line fix to a copy of the installed package put first on PYTHONPATH; the
installed package is never changed.

A llama3-8b-like model (ZeRO-3, GQA 32:8, DLIO's own layout) scaled to 68 MiB a checkpoint, 2 ranks
under mpirun, 3 saves 0.5 s apart. Checked in both runs, each printed before the test fails:

  * one save checkpoint per DLIO save, its path the save's directory, its parts the 4 files
    (2 ranks × model and optimizer states);
  * each window covers ≥ 90 % of the save as DLIO timed it (its per-rank per_epoch_stats.json:
    first rank's start to last rank's end, wall clock put on the recording's anchor) and starts at
    most 0.5 s before it;
  * each checkpoint's bytes_app is the bytes of the save's files on disk, exactly, and Σ
    bytes_device ≤ 1.05 × what the loop device wrote;
  * meta.json's provenance names DLIO's installed version and commit;
  * fsync (`fsync_verdict`, from ckprof's own events): as released no file of any save saw an
    fsync and every save left pages dirty at its return; fixed, every file saw its fsync and every
    save is durable on the device at its end.
"""

from __future__ import annotations

import hashlib
import json
import time
from importlib import metadata
from pathlib import Path

import dlio_run
import pytest
from support.checks import checker
from support.command import ckprof_cmd, clean_env

import ckprof
from ckprof.record.provenance import install_source, installed

pytestmark = [pytest.mark.root, pytest.mark.slow]

RANKS, SAVES, BETWEEN_S = 2, 3, 0.5
FILES_PER_SAVE = 2 * RANKS  # ZeRO-3: each rank its model states and its optimizer states
MIN_COVER, MAX_LEAD_S = 0.90, 0.5
MiB = 2**20
# MLPerf Storage's llama3_8b.yaml (32 layers, hidden 4096, FFN 14336, 32 heads, 8 KV heads, vocab
# 128256, ZeRO-3) scaled down in every dimension: 68 MiB a checkpoint at 2 ranks (4.8 MiB of model
# and 29 MiB of optimizer states a rank)
SHAPE = {"layers": 4, "hidden": 192, "ffn": 672, "heads": 32, "kv_heads": 8, "vocab": 8192}


class DlioRun:
    """One DLIO run recorded and reported: the recording, its JSON report, each save as DLIO timed
    it (Unix s), the files of each save on disk (directory → {file: bytes})."""

    def __init__(self, out: Path, rep: dict, timed: list, saves: dict[str, dict[str, int]], device: str):
        self.rec, self.rep, self.timed, self.saves, self.device = ckprof.load(str(out)), rep, timed, saves, device


def record_dlio(loop_ext4, tmp_path: Path, fixed: bool) -> DlioRun:
    pkg = dlio_run.package_for_test()
    lp, mnt = loop_ext4
    name = "fixed" if fixed else "released"
    folder, conf, dlio_out = mnt / name, tmp_path / "conf", tmp_path / f"{name}-dlio-out"
    dlio_run.write_workload(conf, SHAPE, folder, SAVES, BETWEEN_S, fsync=True)
    env = clean_env(PYTHONUNBUFFERED="1")
    if fixed:
        dlio_run.use_fixed_copy(pkg, tmp_path / "dlio-fixed", env)
    cmd = dlio_run.command(conf, dlio_out, RANKS)
    out, rep_json = tmp_path / f"rec-{name}", tmp_path / f"{name}.json"
    t0 = time.monotonic()
    # cwd: DLIO's hydra writes ./hydra_log, kept outside the recorded --path
    r = ckprof_cmd(
        "record", "-q", "--interval", "0.1", "-o", out, "--path", mnt, "--", *cmd, env=env, cwd=tmp_path, timeout=150
    )
    assert r.returncode == 0, f"{' '.join(cmd)}:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    print(f"\nDLIO {name}: recorded in {time.monotonic() - t0:.1f} s")
    r = ckprof_cmd("report", out, "--format", "json", "-o", rep_json)
    assert r.returncode == 0, r.stderr
    saves = {
        str(d): {str(f): f.stat().st_size for f in sorted(d.iterdir())} for d in sorted(folder.iterdir()) if d.is_dir()
    }
    timed = dlio_run.timed_saves(dlio_out, RANKS)
    run = DlioRun(out, json.loads(rep_json.read_text()), timed, saves, lp.name)
    # the workload YAML DLIO read (--config-dir conf workload=NAME) is in the provenance, hashed
    cfg = conf / "workload" / f"{dlio_run.WORKLOAD_NAME}.yaml"
    hashes = run.rec.meta["provenance"]["config_sha256"]
    assert hashes.get(str(cfg)) == hashlib.sha256(cfg.read_bytes()).hexdigest(), hashes
    return run


def fsync_verdict(run: DlioRun) -> tuple[str, dict[str, dict]]:
    """("pass" | "fail", {file: evidence}) for "every checkpoint file was fsync'd", from ckprof's
    own events: the injected patch's checkpoint_extend (op fsync/fdatasync) naming the file, which
    sees DLIO's `os.fsync(f.fileno())` after its torch.save, and the file's dirty bytes when the
    torch.save that wrote it returned (its checkpoint_end's pending_bytes_at_return, cachestat(2)).
    A stand-in for the report's audit (profiler/analysis/audit.py's fsync rule, which reads the same
    evidence); where the report has the audit, `check_fsync` has it say the same."""
    ev = run.rec.events
    rows = ev.to_dict("records") if not ev.empty else []
    synced = [e for e in rows if e["event"] == "checkpoint_extend" and e.get("op") in ("fsync", "fdatasync")]
    evidence: dict[str, dict] = {}
    for files in run.saves.values():
        for f in files:
            ends = [e for e in rows if e["event"] == "checkpoint_end" and e.get("path") == f]
            evidence[f] = {
                "fsync_calls": sum(e.get("path") == f for e in synced),
                "pending_bytes_at_return": [e.get("pending_bytes_at_return") for e in ends],
            }
    ok = all(e["fsync_calls"] >= 1 for e in evidence.values())
    return ("pass" if ok else "fail"), evidence


def audit_fsync(rep: dict) -> str | None:
    """The status of the report's audit's fsync rule ("pass", "fail", "unknown"), or None where the
    report has no audit (a ckprof from before it)."""
    checks = (rep.get("audit") or {}).get("checks") or []
    if not checks:
        return None
    return next((c["status"] for c in checks if c.get("id") == "fsync"), "no fsync rule in the audit")


def check_fsync(run: DlioRun, check, want: str) -> dict[str, dict]:
    """The fsync verdict is `want` ("pass" or "fail"), and the report's audit, where it has one,
    says the same; every file's evidence printed."""
    verdict, evidence = fsync_verdict(run)
    for f, e in evidence.items():
        print(
            f"  {Path(f).parent.name}/{Path(f).name}: fsync calls {e['fsync_calls']}, "
            f"dirty at return {e['pending_bytes_at_return']} B"
        )
    check(f"the fsync verdict is {want}", verdict == want, verdict)
    audited = audit_fsync(run.rep)
    if audited is not None:
        check("the report's audit says the same", audited == want, f"its fsync rule: {audited}")
    return evidence


def check_dlio_run(run: DlioRun) -> list[str]:
    """Print every figure; return the checks (both runs alike) that failed."""
    failed: list[str] = []
    check = checker(failed)
    rep, anchor_wall = run.rep, int(run.rec.meta["start"]["wall_ns"])
    cps = [c for c in rep["checkpoints"] if c["kind"] == "save" and c["ok"] is not False]
    for c in cps:
        print(
            f"  checkpoint {c['id']}: {c['path']} {c['start_s']:.3f}–{c['app_end_s']} s parts "
            f"{len(c['parts'] or [])} bytes_app {c['bytes_app']} bytes_device {c['bytes_device']} durable "
            f"{c['durable']} at return {c['durable_at_return']} finished by {c['finished_by']}"
        )
    check("DLIO saved as configured", len(run.saves) == SAVES, f"{len(run.saves)} save directories, {SAVES} asked")
    check(
        "each save wrote its files",
        all(len(f) == FILES_PER_SAVE for f in run.saves.values()),
        str({Path(d).name: len(f) for d, f in run.saves.items()}),
    )
    check("one checkpoint per DLIO save", len(cps) == len(run.saves), f"{len(cps)} checkpoints, {len(run.saves)} saves")
    by_path = {c["path"]: c for c in cps}
    for k, (d, files) in enumerate(run.saves.items(), 1):
        c = by_path.get(d)
        if c is None:
            check(f"save {d} has its checkpoint", False, f"none of {sorted(by_path)}")
            continue
        parts = {p["path"] for p in c["parts"] or []}
        check(f"{Path(d).name}: its parts are its files", parts == set(files), f"{sorted(parts)}")
        check(
            f"{Path(d).name}: bytes_app = its files on disk",
            c["bytes_app"] == sum(files.values()),
            f"{c['bytes_app']} B against {sum(files.values())} B",
        )
        # DLIO's own timer of this save (first rank's start to last rank's end), on the anchor
        a, b = (t - anchor_wall / 1e9 for t in run.timed[k - 1])
        wa, wb = c["start_s"], c["app_end_s"] if c["app_end_s"] is not None else c["start_s"]
        cover = max(0.0, min(b, wb) - max(a, wa)) / max(1e-9, b - a)
        check(
            f"{Path(d).name}: window covers ≥ 90 % of DLIO's timed save",
            cover >= MIN_COVER,
            f"{100 * cover:.1f} % of {1e3 * (b - a):.1f} ms (window {1e3 * (wa - a):+.1f} ms at its start, "
            f"{1e3 * (wb - b):+.1f} ms at its end)",
        )
        check(f"{Path(d).name}: window starts ≤ 0.5 s before the save", a - wa <= MAX_LEAD_S, f"{a - wa:.3f} s")
    b = run.rec.block()
    dev_written = float(b.loc[b["device"] == run.device, "write_bytes"].sum()) if not b.empty else 0.0
    cp_dev = sum(c["bytes_device"] or 0 for c in cps)
    check(
        "Σ bytes_device ≤ 1.05 × device written",
        cp_dev <= 1.05 * dev_written,
        f"{cp_dev / MiB:.2f} MiB / {dev_written / MiB:.2f} MiB",
    )
    prov = run.rec.meta["provenance"]
    dist = installed(["dlio_benchmark"]).get("dlio_benchmark")
    commit, archive_sha256 = install_source(dist[1]) if dist else (None, None)
    want = {"version": dist[0], "commit": commit, "archive_sha256": archive_sha256, "unknown": None} if dist else None
    check("provenance names the installed DLIO", prov.get("dlio") == want, f"{prov.get('dlio')} against {want}")
    archive = Path(__file__).resolve().parent / "dlio_benchmark-2.0.0-e1919d7b.tar.gz"
    if archive_sha256 is not None:  # installed from the archive kept here (.ci/run): its hash, not pip's 2.0.0
        got = hashlib.sha256(archive.read_bytes()).hexdigest()
        check(
            "provenance's DLIO archive is the one kept here", archive_sha256 == got, f"{archive_sha256} against {got}"
        )
    check(
        "DLIO's version is read from the launched Python",
        "launched" in (prov.get("libraries_source") or "")
        and prov["dlio"]["version"] == metadata.version("dlio_benchmark"),
        f"{prov.get('libraries_source')}",
    )
    return failed


def test_dlio_as_released_never_fsyncs(loop_ext4, tmp_path):
    """fsync: True in the workload, and no file of any save sees an fsync: each save returns with
    its pages dirty, durable only when writeback gets to them."""
    run = record_dlio(loop_ext4, tmp_path, fixed=False)
    failed = check_dlio_run(run)
    check = checker(failed)
    evidence = check_fsync(run, check, "fail")
    check("no file saw an fsync", all(e["fsync_calls"] == 0 for e in evidence.values()), "see above")
    dirty_of = {}
    for d, files in run.saves.items():
        dirty_of[d] = sum(sum(x or 0 for x in evidence[f]["pending_bytes_at_return"]) for f in files)
        check(f"{Path(d).name} left pages dirty at its return", dirty_of[d] > 0, f"{dirty_of[d] / MiB:.2f} MiB")
    for c in run.rep["checkpoints"]:
        if c["kind"] == "save" and c["path"] in run.saves:
            check(
                f"{Path(c['path']).name} not durable when it returned, finished by nothing",
                c["durable_at_return"] is False and not c["finished_by"],
                f"durable at return {c['durable_at_return']}, finished by {c['finished_by']}",
            )
            # every rank's files, not the first rank's alone: the save's dirty bytes are its calls'
            check(
                f"{Path(c['path']).name}'s dirty bytes at return are all its files' (each call's look, summed)",
                c["pending_bytes_at_return"] == dirty_of[c["path"]],
                f"{c['pending_bytes_at_return']} B against {dirty_of[c['path']]} B",
            )
    assert not failed, failed


def test_dlio_fsync_fixed_fsyncs_every_file(loop_ext4, tmp_path):
    """The one-line fix: every file of every save is fsync'd by DLIO, and each save is durable on
    the device when its window ends."""
    run = record_dlio(loop_ext4, tmp_path, fixed=True)
    failed = check_dlio_run(run)
    check = checker(failed)
    check_fsync(run, check, "pass")
    for c in run.rep["checkpoints"]:
        if c["kind"] == "save" and c["path"] in run.saves:
            check(
                f"{Path(c['path']).name} durable on the device at its end, finished by fsync",
                c["durable"] is True and c["durable_where"] == "device" and "fsync" in (c["finished_by"] or []),
                f"durable {c['durable']} where {c['durable_where']} finished by {c['finished_by']}",
            )
    assert not failed, failed
