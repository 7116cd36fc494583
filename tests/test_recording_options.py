"""One options object for every command that records (issue 23 item 4): `ckprof record`,
`ckprof workload` and `ckprof workload load` take the recording's flags from one decorator
(cli/recording_options.py) into one RecordOptions (record/options.py), so their names, help and
parsing cannot drift apart, and what the workload is asked to record reaches its recording."""

from __future__ import annotations

import json

import click
import pytest
from support.command import ckprof_cmd

from ckprof.cli.record import record
from ckprof.cli.workload import load_cmd, workload
from ckprof.record.options import RecordOptions

RECORDING_FLAGS = {"--output", "--device", "--force", "--flush-interval", "--nvme-interval"}


def options_of(command: click.Command) -> dict[str, str | None]:
    """Each long flag → its help, for the flags a command takes."""
    return {
        name: p.help for p in command.params if isinstance(p, click.Option) for name in p.opts if name.startswith("--")
    }


@pytest.mark.parametrize("command", [workload, load_cmd], ids=["workload", "workload load"])
def test_the_recording_flags_are_the_same_everywhere(command):
    mine, records = options_of(command), options_of(record)
    for flag in RECORDING_FLAGS:
        assert mine[flag] == records[flag], flag
    # the sampling interval: --interval of `record`, --sample-interval where --interval is the workload's
    assert mine["--sample-interval"] == records["--interval"]


def test_a_workload_records_as_its_recording_flags_say(tmp_path):
    target, rec = tmp_path / "ckpt", tmp_path / "rec"
    target.mkdir()
    args = ["workload", "--total-size", "8MiB", "--ranks", "1", "--target", target, "-o", rec]
    args += ["--sample-interval", "50ms", "--flush-interval", "2s", "--nvme-interval", "3s"]
    r = ckprof_cmd(*args, timeout=180)
    assert r.returncode == 0, r.stderr
    meta = json.loads((rec / "meta.json").read_text())
    assert meta["interval_s"] == 0.05
    got = meta["workload"]["config"]["recording"]
    assert (got["interval_s"], got["flush_s"], got["nvme_interval_s"]) == (0.05, 2.0, 3.0)
    assert [p["path"] for p in meta["topology"]["paths"]] == [str(target)]  # its target is the recorded path
    # a second run into the same recording is refused without --force, as `ckprof record` does
    again = ckprof_cmd(*args, timeout=180)
    assert again.returncode != 0 and "--force" in again.stderr


def test_the_decorator_hands_one_record_options(monkeypatch):
    """`ckprof record`'s flags reach session.record as one RecordOptions, paths and quiet included."""
    import ckprof.record.child as child
    import ckprof.record.session as session

    got = {}
    monkeypatch.setattr(session, "record", lambda argv, opts, **kw: got.update(argv=argv, opts=opts))
    monkeypatch.setattr(child, "exit_like", lambda result: None)
    args = ["-o", "R", "--interval", "20ms", "--nvme-interval", "2s", "--device", "loop0", "--path", "/tmp", "-q"]
    record.main([*args, "--", "true"], standalone_mode=False)
    assert got["argv"] == ["true"]
    assert got["opts"] == RecordOptions(
        output="R", interval_s=0.02, nvme_interval_s=2.0, quiet=True, paths=("/tmp",), devices=("loop0",)
    )
