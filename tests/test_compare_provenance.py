"""`ckprof compare` says where two recordings were not made alike (issue 26 item 3): real
`ckprof record` runs onto tmpfs targets mounted with different options are flagged with the option
strings /proc/self/mountinfo gave each, and two runs made alike are not."""

from __future__ import annotations

import json
import subprocess
import sys

from support.command import ckprof_cmd
from support.system import mount_tmpfs, need_root


def record_onto(tmp_path, name: str, options: str) -> tuple[str, str]:
    """A short recording with a tmpfs target remounted with `options`; (recording, its mount options)."""
    target = mount_tmpfs(tmp_path / f"target-{name}", size="4m")
    try:
        subprocess.run(["mount", "-o", f"remount,{options}", str(target)], check=True)
        rec = str(tmp_path / f"rec-{name}")
        r = ckprof_cmd("record", "-q", "-o", rec, "--path", str(target), "--", sys.executable, "-c", "pass")
        assert r.returncode == 0, r.stderr
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)
    meta = json.load(open(f"{rec}/meta.json"))
    return rec, meta["topology"]["paths"][0]["mount"]["options"]


def test_compare_flags_a_target_mounted_otherwise_and_nothing_between_alike_runs(tmp_path):
    need_root()
    a, opts_a = record_onto(tmp_path, "a", "noatime")
    b, opts_b = record_onto(tmp_path, "b", "strictatime")
    c, _ = record_onto(tmp_path, "c", "noatime")
    assert opts_a != opts_b
    r = ckprof_cmd("compare", a, b, c, "--format", "json")
    assert r.returncode == 0, r.stderr
    diffs = json.loads(r.stdout)["provenance_differences"]
    # b's target differs in its mount options (paths differ, so it is "target 1"); c was made as a was
    assert [(d["recording"], d["what"], d["first"], d["this"]) for d in diffs] == [
        (2, "target 1: mount options", opts_a, opts_b)
    ]
    md = ckprof_cmd("compare", a, b, "--format", "md").stdout
    assert "**Not made alike**" in md and f"| [2] | target 1: mount options | {opts_a} | {opts_b} |" in md
    same = ckprof_cmd("compare", a, c, "--format", "md").stdout
    assert "Not made alike" not in same
