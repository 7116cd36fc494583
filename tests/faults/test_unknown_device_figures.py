"""Device figures ckprof cannot stand behind are unknown with the reason, never a "measured" 0
(issue 22, items 2 and 3): a recorded device that goes away mid-recording, and a checkpoint that
no block sample covers (the recorder killed, a sampling gap). The run's device total and mean leave
such checkpoints out and say how many and why. One rule decides it:
ckprof.analysis.checkpoints.device_figure_unknown."""

from __future__ import annotations

import json
import signal
import sys

import pytest
from support.command import ckprof_cmd

from ckprof.collectors.base import read_text

MiB = 2**20

# writes N MiB to a block device or file with O_DIRECT (page-aligned buffer): the device sees them
# at once, without the page cache
WRITE = """
import ckprof, mmap, os, signal, subprocess, time
def write(path, n):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    buf = mmap.mmap(-1, 1 << 20)
    buf.write(b"\\x01" * (1 << 20))
    for _ in range(n):
        os.write(fd, buf)
    os.fsync(fd)
    os.close(fd)
"""


def reports(rec, tmp_path) -> tuple[dict, str, str]:
    """The JSON, Markdown and (static) HTML reports of a recording, each through `ckprof report`."""
    out = {}
    for fmt in ("json", "md"):
        r = ckprof_cmd("report", str(rec), "--format", fmt, timeout=120)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        out[fmt] = r.stdout
    html = tmp_path / "report.html"
    r = ckprof_cmd("report", str(rec), "--static", "-o", str(html), timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(out["json"]), out["md"], html.read_text()


def md_table(md: str, heading: str) -> list[list[str]]:
    """The body rows of the Markdown table under `heading`, as cells."""
    lines = md.split(heading, 1)[1].strip().splitlines()
    rows = []
    for ln in lines[2:]:
        if not ln.startswith("|"):
            break
        rows.append([c.strip() for c in ln.strip("|").split("|")])
    return rows


def detached_here(lp) -> bool:
    """Whether the test's loop device was detached (the number may be someone else's by now)."""
    return read_text(f"/sys/block/{lp.name}/loop/backing_file") != str(lp.image)


# -- a device that goes away (item 2) ---------------------------------------------------------------


@pytest.mark.root
def test_a_loop_device_detached_mid_recording_is_unknown_from_then_on(make_loop, tmp_path):
    """Save 1 writes 16 MiB to the recorded loop device; the device is detached (`losetup -d`);
    save 2 writes elsewhere. Save 2's figures on the device are unknown since the detach, with
    the time and the reason, in every format; save 1's stay measured; the run's mean is save 1's."""
    from ckprof.collectors.udev import UeventCollector

    probe = UeventCollector({"loop0"}).probe()
    if not probe.ok:
        pytest.skip(f"no uevents here: {probe.detail}")
    lp = make_loop("64M")
    other = tmp_path / "elsewhere.bin"
    child = WRITE + (
        "time.sleep(0.3)\n"
        f"with ckprof.checkpoint(step=1, bytes=16 << 20):\n    write({lp.dev!r}, 16)\n"
        "time.sleep(0.3)\n"
        f"subprocess.run(['losetup', '-d', {lp.dev!r}], check=True)\n"
        "time.sleep(0.6)\n"
        f"with ckprof.checkpoint(step=2, bytes=16 << 20):\n    write({str(other)!r}, 16)\n"
        "time.sleep(0.3)\n"
    )
    rec = tmp_path / "rec"
    r = ckprof_cmd("record", "-q", "-o", str(rec), "--device", lp.name, "--", sys.executable, "-c", child, timeout=120)
    if detached_here(lp):
        lp.close = lambda: None
    assert r.returncode == 0, r.stderr
    events = [json.loads(x) for x in (rec / "events.jsonl").read_text().splitlines() if x.strip()]
    detach = [e for e in events if e["event"] == "device_change" and e["uevent"].get("DISK_MEDIA_CHANGE") == "1"]
    assert detach, "the recorder wrote no uevent for the detach"
    rep, md, html = reports(rec, tmp_path)
    c1, c2 = rep["checkpoints"]
    start_ns = json.loads((rec / "meta.json").read_text())["start"]["monotonic_ns"]
    detach_s = (detach[0]["t_ns"] - start_ns) / 1e9

    d2 = c2["devices"][lp.name]
    assert d2["write_bytes"] is None and d2["read_bytes"] is None and d2["mean_write_gib_per_s"] is None
    assert c1["devices"][lp.name]["write_bytes"] == 16 * MiB and c1["device_unknown"] == []
    assert c1["bytes_device"] == 16 * MiB and c1["device_gib_per_s"] > 0
    assert d2["unknown"]["code"] == "device_gone" and d2["unknown"]["since_s"] == pytest.approx(detach_s)
    assert "DISK_MEDIA_CHANGE" in d2["unknown"]["reason"] and lp.name in d2["unknown"]["reason"]
    assert c2["bytes_device"] is None and c2["device_gib_per_s"] is None and c2["device_to_app_ratio"] is None
    assert [u["device"] for u in c2["device_unknown"]] == [lp.name]

    run = rep["run"]
    assert run["mean_device_gib_per_s"] == pytest.approx(c1["device_gib_per_s"])
    assert run["bytes_device_total"] == 16 * MiB
    for fig in ("bytes_device_total", "mean_device_gib_per_s"):
        lo = run["device_left_out"][fig]
        assert (lo["of"], lo["counted"]) == (2, 1) and [x["id"] for x in lo["left_out"]] == [c2["id"]]
        assert lo["left_out"][0]["code"] == "device_gone"
    assert any(n.startswith(f"{lp.name} went away at {detach_s:.2f} s") for n in rep["notes"]), rep["notes"]
    assert any(n.startswith(f"checkpoint {c2['id']}: device figures unknown") for n in rep["notes"])

    # the tables say "unknown" and why, never 0 B or 0.000 GiB/s
    rows = md_table(md, "## Checkpoints")
    bytes_col, gibs_col = 10, 13
    assert rows[0][bytes_col] == "16.00 MiB"
    assert rows[1][bytes_col].startswith(f"unknown: {lp.name} went away at {detach_s:.2f} s")
    assert rows[1][gibs_col] == "unknown"
    dev = [r for r in md_table(md, "### Per device") if r[0] == "2"]
    assert dev[0][3].startswith("unknown: ") and set(dev[0][4:]) == {"unknown"}
    summary = {r[0]: r[1] for r in md_table(md, "## Summary")}
    assert "over 1 of 2 saves; 1 left out: a device went away" in summary["mean device bandwidth"]
    assert f"unknown: {lp.name} went away at {detach_s:.2f} s" in html
    assert "over 1 of 2 saves; 1 left out: a device went away" in html


# -- no sample, no figure (item 3) -----------------------------------------------------------------


@pytest.mark.root
def test_a_save_after_the_recorder_was_killed_has_unknown_device_figures(make_loop, tmp_path):
    """The recorder is killed (SIGKILL) between two saves of 16 MiB each to the recorded device; the
    command goes on and its markers still reach events.jsonl. Save 2 has no block sample: unknown,
    with the reason; it takes none of save 1's bytes, and the run's mean is save 1's alone."""
    lp = make_loop("64M")
    child = WRITE + (
        "time.sleep(0.3)\n"
        f"with ckprof.checkpoint(step=1, bytes=16 << 20):\n    write({lp.dev!r}, 16)\n"
        "time.sleep(0.8)\n"  # > the flush interval: save 1's samples are on disk
        "os.kill(os.getppid(), signal.SIGKILL)\n"
        "time.sleep(0.3)\n"
        f"with ckprof.checkpoint(step=2, bytes=16 << 20):\n    write({lp.dev!r}, 16)\n"
    )
    rec = tmp_path / "rec"
    # capture_output waits for the command too: it holds the pipes after ckprof is killed
    r = ckprof_cmd(
        "record",
        "-q",
        "--flush-interval",
        "100ms",
        "-o",
        str(rec),
        "--device",
        lp.name,
        "--",
        sys.executable,
        "-c",
        child,
        timeout=120,
    )
    assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr)
    rep, md, _ = reports(rec, tmp_path)
    c1, c2 = rep["checkpoints"]
    assert c2["app_end_s"] is not None, "the command's second save was not recorded"
    assert c2["bytes_device"] is None and c2["device_gib_per_s"] is None and c2["device_busy_s"] is None
    assert c1["bytes_device"] == 16 * MiB and c1["devices"][lp.name]["unknown"] is None
    u = c2["devices"][lp.name]["unknown"]
    assert u["code"] == "no_sample" and "the recorder stopped or was killed" in u["reason"]
    assert u["since_s"] < c2["start_s"]
    run = rep["run"]
    assert run["mean_device_gib_per_s"] == pytest.approx(c1["device_gib_per_s"])
    lo = run["device_left_out"]["mean_device_gib_per_s"]
    assert (lo["of"], lo["counted"], lo["left_out"][0]["code"]) == (2, 1, "no_sample")
    rows = md_table(md, "## Checkpoints")
    assert rows[1][10].startswith(f"unknown: no block sample of {lp.name} covers this checkpoint")
    assert rows[1][13] == "unknown"
    summary = {r[0]: r[1] for r in md_table(md, "## Summary")}
    assert "over 1 of 2 saves; 1 left out: no block sample covers it" in summary["mean device bandwidth"]


def built(tmp_path, keep, checkpoints, name="rec", events=(), complete=True):
    """A recording of sda writing 50 MiB/s in each checkpoint, its block rows kept where keep(t_s);
    complete=False: as a killed recorder leaves it (no end, status `recording`)."""
    from ckprof.testing import RecordingBuilder

    rb = RecordingBuilder(tmp_path / name, duration_s=10, interval_s=0.1)
    rb.block("sda", lambda s: sum(((s > a) & (s <= b)) * 50.0 * MiB for a, b in checkpoints))
    rows = rb.collectors["block"]["rows"]
    rows[:] = [r for r in rows if keep((r["t_ns"] - rb.start_ns) / 1e9)]
    for a, b in checkpoints:
        rb.checkpoint(a, b, int((b - a) * 50 * MiB))
    for ev, t_s, fields in events:
        rb.event(ev, t_s, **fields)
    return rb.finish(complete=complete)


def analysed(path):
    import ckprof
    from ckprof.analysis.analyze import analyze

    return analyze(ckprof.load(str(path))).report


def test_samples_that_stop_leave_later_saves_unknown_and_out_of_the_mean(tmp_path):
    """Block samples end at 5 s (the recorder killed; the markers go on): the save at 6–7 s is
    unknown and left out of the mean, which is the save at 2–3 s's 0.049 GiB/s, not half of it;
    the earlier save keeps all of its 50 MiB (the later one took no share of the last interval)."""
    rep = analysed(built(tmp_path, lambda s: s <= 5.0, [(2, 3), (6, 7)], complete=False))
    c1, c2 = rep["checkpoints"]
    assert c1["bytes_device"] == pytest.approx(50 * MiB, rel=0.01)
    assert c2["bytes_device"] is None and c2["device_gib_per_s"] is None
    (u,) = c2["device_unknown"]
    assert (u["device"], u["code"], u["since_s"]) == ("sda", "no_sample", pytest.approx(5.0))
    assert "its samples end at 5.00 s" in u["reason"]
    assert rep["run"]["mean_device_gib_per_s"] == pytest.approx(c1["device_gib_per_s"])
    assert rep["run"]["bytes_device_total"] == pytest.approx(50 * MiB, rel=0.01)


def test_a_save_whose_samples_stop_inside_it_is_unknown(tmp_path):
    """Samples end at 4.5 s inside the save at 4–7 s: its bytes after them were never counted."""
    (c,) = analysed(built(tmp_path, lambda s: s <= 4.5, [(4, 7)], complete=False))["checkpoints"]
    assert c["bytes_device"] is None and c["device_unknown"][0]["code"] == "no_sample"
    assert "2.50 s before this checkpoint's end" in c["device_unknown"][0]["reason"]


def test_a_save_inside_a_sampling_gap_is_unknown(tmp_path):
    """No sample from 4 s to 7 s and the save at 5–6 s inside: the gap's bytes cannot be told
    apart; a save the gap only cuts into keeps its bytes (test_read_faults' gap test)."""
    rep = analysed(built(tmp_path, lambda s: not 4.0 < s < 7.0, [(5, 6)]))
    (c,) = rep["checkpoints"]
    assert c["bytes_device"] is None and c["device_gib_per_s"] is None
    (u,) = c["device_unknown"]
    assert u["code"] == "sampling_gap" and "from 4.00 s to 7.00 s" in u["reason"]
    assert rep["run"]["mean_device_gib_per_s"] is None and rep["run"]["bytes_device_total"] is None
    from ckprof.report.tables import summary_rows

    cell = dict((w, v) for w, v, _ in summary_rows(rep))["mean device bandwidth"]
    assert cell == "unknown (every save left out: a sampling gap; see the notes)"


def test_a_removed_device_recorded_as_device_remove(tmp_path):
    """A `device_remove` uevent of sda at 4.5 s: the save before it is measured, the one across
    it and the one after are unknown since 4.5 s; CSV export gives the reason, not a dict."""
    remove = ("device_remove", 4.5, {"device": "sda", "disk": None, "subsystem": "block", "uevent": {}})
    path = built(tmp_path, lambda s: True, [(1, 2), (4, 5), (7, 8)], events=[remove])
    rep = analysed(path)
    c1, c2, c3 = rep["checkpoints"]
    assert c1["device_unknown"] == [] and c1["bytes_device"] == pytest.approx(50 * MiB, rel=0.01)
    for c in (c2, c3):
        assert c["devices"]["sda"]["unknown"]["since_s"] == pytest.approx(4.5)
        assert "the device was removed" in c["devices"]["sda"]["unknown"]["reason"]
    lo = rep["run"]["device_left_out"]["bytes_device_total"]
    assert (lo["counted"], [x["id"] for x in lo["left_out"]]) == (1, [c2["id"], c3["id"]])
    import ckprof
    from ckprof.analysis.analyze import analyze
    from ckprof.report.export import checkpoints_frame

    df = checkpoints_frame(analyze(ckprof.load(str(path))))
    assert df["sda.unknown"].isna().iloc[0] and df["sda.unknown"].iloc[2].startswith("sda went away at 4.50 s")
    assert df["sda.write_bytes"].isna().tolist() == [False, True, True]


def test_the_rule_is_one_function_others_can_call(tmp_path):
    """device_figure_unknown answers per (window, device); unknown_entry makes the same for a
    reason found elsewhere (a checkpoint with no block device behind it), which nulls the row's
    device figures the same way."""
    import ckprof
    from ckprof.analysis import checkpoints as C
    from ckprof.analysis import timeline

    rec = ckprof.load(built(tmp_path, lambda s: s <= 5.0, [(2, 3)], complete=False))
    tl = timeline.build(rec)
    s = C.device_sampling(tl, rec.events, finished=False)["sda"]
    assert C.device_figure_unknown(s, "sda", tl.start_ns + 2e9, tl.start_ns + 3e9, tl) is None
    u = C.device_figure_unknown(s, "sda", tl.start_ns + 6e9, tl.start_ns + 7e9, tl)
    assert u["code"] == "no_sample"
    whole = C.unknown_entry("no_block_device", "no block device behind /mnt/tmpfs (tmpfs)")
    assert whole == {"device": None, "code": "no_block_device", "reason": whole["reason"], "since_s": None}


def test_a_device_gone_from_diskstats_without_a_uevent(tmp_path):
    """sda's rows end at 5 s while sdb's go on (no uevent seen: a rootless container gets none):
    the save at 6–7 s is unknown on sda, and the reason says the device left, not the recorder."""
    from ckprof.testing import RecordingBuilder

    rb = RecordingBuilder(tmp_path / "rec", duration_s=10, interval_s=0.1)
    rb.block("sda", lambda s: ((s > 6) & (s <= 7)) * 50.0 * MiB).block("sdb", lambda s: 0 * s)
    rows = rb.collectors["block"]["rows"]
    rows[:] = [r for r in rows if r["device"] != "sda" or r["t_ns"] <= rb.ns(5.0)]
    rb.checkpoint(6, 7, 50 * MiB)
    (c,) = analysed(rb.finish())["checkpoints"]
    assert c["devices"]["sdb"]["unknown"] is None and c["devices"]["sda"]["write_bytes"] is None
    assert "it was no longer in /proc/diskstats after that" in c["devices"]["sda"]["unknown"]["reason"]
    assert c["bytes_device"] is None


def test_a_truncated_recording_names_why_its_samples_end(tmp_path):
    """A recording truncated by a full disk (samples stop, status `truncated` with the reason):
    a save after the last sample says so."""
    path = built(tmp_path, lambda s: s <= 5.0, [(2, 3), (6, 7)])
    meta = json.loads((tmp_path / "rec" / "meta.json").read_text())
    meta.update(status="truncated", truncated="disk full writing samples/block")
    (tmp_path / "rec" / "meta.json").write_text(json.dumps(meta))
    c1, c2 = analysed(path)["checkpoints"]
    assert c1["device_unknown"] == []
    assert c2["device_unknown"][0]["reason"].endswith(
        "its samples end at 5.00 s (the recording was truncated: disk full writing samples/block)"
    )
