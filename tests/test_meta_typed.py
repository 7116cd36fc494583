"""meta.json read once into typed parts (analysis/meta.py, issue 23): a key missing, or holding
another JSON type than the part's field, is unknown (None), never a crash of the report, and
what is well formed reads as before."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import ckprof
from ckprof.analysis import analyze
from ckprof.analysis.meta import Meta, parsed
from ckprof.testing import NVME_SCHEMA, RecordingBuilder

MiB = 2**20


@dataclass(frozen=True)
class Inner:
    n: int | None = None


@dataclass(frozen=True)
class Outer:
    name: str | None = None
    ratio: float | None = None
    flag: bool | None = None
    inner: Inner = field(default_factory=Inner)
    maybe: Inner | None = None
    items: tuple[Inner, ...] = ()
    by_name: dict[str, Inner] = field(default_factory=dict)


def test_the_parse_rule_missing_or_mistyped_is_none_and_unknown_keys_are_left():
    got = parsed(
        Outer,
        {
            "name": 7,  # not a string
            "ratio": 2,  # an int is a float's value, kept as recorded
            "flag": "yes",  # not a bool
            "inner": {"n": True},  # a bool is no number
            "items": [{"n": 1}, "damaged", {"n": 2.5}, {}],
            "by_name": {"a": {"n": 3}, "b": None},
            "newer_key": {"x": 1},
        },
    )
    assert got == Outer(
        name=None,
        ratio=2,
        flag=None,
        inner=Inner(None),
        maybe=None,
        items=(Inner(1), Inner(None), Inner(None)),
        by_name={"a": Inner(3), "b": Inner(None)},
    )
    assert parsed(Outer, "not an object") == Outer()
    assert parsed(Outer, {"maybe": {}}).maybe == Inner()


def test_a_damaged_meta_json_part_is_unknown_in_the_report_not_a_crash(tmp_path):
    meta = {
        "host": {"hostname": "h1", "kernel": "6.18", "mem_total_bytes": "lots"},
        "provenance": {"libraries": {"numpy": "2.0"}, "dlio": "damaged", "config_sha256": ["damaged"]},
        "topology": {
            "identity": {"nvme0n1": "damaged", "nvme1n1": {"firmware_rev": "FW1"}},
            "paths": ["damaged", {"path": "/ckpt", "mount": "damaged"}],
        },
        "workload": {
            "plan": {"preset": "llama3-8b", "subset": "yes", "ranks": "8", "world": 8},
            "results": {"checkpoints": ["damaged", {"step": 10, "seconds": "slow"}], "load": "damaged"},
            "rules": {"checks": ["damaged", {"rule": "4.7.1", "figures": "damaged"}]},
        },
    }
    rb = RecordingBuilder(tmp_path / "rec", duration_s=6, meta=meta)
    rb.collector("nvme", NVME_SCHEMA, describe={"controllers": {"nvme0": "damaged", "nvme1": {"devices": ["nvme1n1"]}}})
    rb.block("nvme1n1", lambda t: (t > 2) * (t < 3) * 50 * MiB)
    rb.checkpoint(2, 3, 50 * MiB, step=10)
    an = analyze(ckprof.load(rb.finish()))
    rep = an.model

    prov = rep.recording.provenance
    assert prov.kernel == "6.18" and prov.libraries == {"numpy": "2.0"}
    assert prov.dlio is None and prov.config_sha256 == {}
    assert prov.nvme_firmware == {"nvme0n1": None, "nvme1n1": "FW1"}
    assert [(fs.path, fs.fstype, fs.options) for fs in prov.file_systems] == [("/ckpt", None, None)]
    assert an.ctx.ssd_devices == {"nvme0": [], "nvme1": ["nvme1n1"]}
    assert rep.checkpoints[0].workload_write_s is None

    checks = {c.id: c for c in rep.audit.checks}
    subset = checks["subset"]
    assert subset.status == "unknown" and "does not say whether it ran a subset" in subset.reason
    assert (subset.figures["preset"], subset.figures["ranks"], subset.figures["world"]) == ("llama3-8b", None, 8)
    assert checks["client_memory"].figures["client_memory_bytes"] is None
    assert "host.mem_total_bytes" in checks["client_memory"].reason
    assert checks["run_timer"].status == "unknown"
    json.loads(json.dumps(an.report))  # the report's JSON is still plain JSON


def test_meta_reads_a_well_formed_workload_part():
    m = Meta.from_meta(
        {
            "command": ["dlio_benchmark", 3],
            "workload": {
                "plan": {"preset": "llama3-8b", "subset": True, "ranks": 8, "world": 64, "scale": 0.5},
                "config": {"fsync": False, "rules": "v3.0", "target": "s3://b/ckpt"},
                "results": {"checkpoints": [{"step": 1, "start_ns": 5, "end_ns": 9, "seconds": 4e-9}]},
                "rules": {"checks": [{"rule": "4.7.1", "figures": {"gap_s": 2, "write_end_unix_ns": 1}}]},
            },
        }
    )
    assert m.argv == ["dlio_benchmark", "3"]
    plan = m.workload.plan
    assert plan is not None and (plan.preset, plan.subset, plan.ranks, plan.world, plan.scale) == (
        "llama3-8b",
        True,
        8,
        64,
        0.5,
    )
    assert (m.workload.config.fsync, m.workload.config.rules, m.workload.config.target) == (
        False,
        "v3.0",
        "s3://b/ckpt",
    )
    (c,) = m.workload.results.checkpoints
    assert (c.step, c.start_ns, c.end_ns, c.seconds) == (1, 5, 9, 4e-9)
    gap = m.workload.rules.read_after_write()
    assert gap is not None and (gap.gap_s, gap.write_end_unix_ns, gap.read_start_unix_ns) == (2, 1, None)
    assert Meta.from_meta({}).workload.plan is None and Meta.from_meta({}).provenance is None


def test_marks_read_as_typed_events_with_and_without_text(tmp_path):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=4)
    rb.block("sda", lambda t: 0 * t)
    rb.event("mark", 1.0, text="epoch 1").event("mark", 2.5)
    an = analyze(ckprof.load(rb.finish()))
    assert an.plot["marks"] == [(1.0, "epoch 1"), (2.5, "")]
