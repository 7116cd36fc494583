"""Reports under faults, round two (issue 22): a recording with very many marks draws in bounded
time; every message that names a user's string is one line without control bytes; a report that
cannot be written whole leaves the previous one as it was."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.command import ckprof_cmd
from support.system import fill

import ckprof
from ckprof.analysis import analyze
from ckprof.report import interactive, plots
from ckprof.testing import RecordingBuilder

MiB = 2**20


def marked_recording(path, n_marks: int, duration_s: float = 60.0) -> str:
    """Two block devices and a checkpoint, with `n_marks` ckprof.mark() events over the run."""
    rb = RecordingBuilder(duration_s=duration_s, interval_s=0.5)
    for dev in ("nvme0n1", "nvme1n1"):
        rb.block(dev, lambda t: np.where((t > 10) & (t < 20), 100 * MiB, 0), queue=lambda t: 2.0)
    rb.checkpoint(10, 20, 1000 * MiB, step=1)
    for i, t_s in enumerate(np.linspace(0, duration_s * 0.999, n_marks)):
        rb.event("mark", float(t_s), text=f"step {i}")
    return rb.finish(path)


@pytest.fixture(scope="module")
def few_and_many(tmp_path_factory):
    d = tmp_path_factory.mktemp("marks")
    return (
        analyze(ckprof.load(marked_recording(d / "few", 10))),
        analyze(ckprof.load(marked_recording(d / "many", 20_000))),
    )


def _png_artists(an, monkeypatch) -> list[int]:
    """The PNG timeline's artists per panel (the figure as it is saved)."""
    seen = []

    def keep(fig):
        seen.extend(len(ax.get_children()) for ax in fig.axes)
        plots.pyplot_module().close(fig)
        return b"png"

    monkeypatch.setattr(plots, "fig_png", keep)
    assert plots.timeline(an) == b"png"
    return seen


def test_the_png_timeline_draws_marks_in_a_bounded_number_of_artists(few_and_many, monkeypatch):
    few, many = few_and_many
    assert len(many.plot["marks"]) == 20_000
    # one collection per panel whatever the marks: 20,000 marks cost what 10 do
    assert _png_artists(many, monkeypatch) == _png_artists(few, monkeypatch)


def _mark_rows(item) -> list[int]:
    """Rows of every data source in a Bokeh JSON item that carries hover `text` (the marks')."""
    rows = []

    def walk(o):
        if isinstance(o, dict):
            entries = o.get("entries") if o.get("type") == "map" else None
            if entries and any(k == "text" for k, _ in entries):
                rows.append(len(dict(entries)["text"]))
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(item)
    return rows


def test_the_interactive_timeline_sends_a_bounded_number_of_mark_lines(few_and_many):
    few, many = few_and_many
    assert _mark_rows(interactive.timeline_item(few)) == [10]  # few: each mark its own line
    rows = _mark_rows(interactive.timeline_item(many))
    # one source for every panel, no more lines than a wide screen has pixel columns
    assert len(rows) == 1 and 0 < rows[0] <= 2000


def test_binned_marks_stand_for_every_mark_and_the_report_says_how_many_were_drawn(few_and_many):
    few, many = few_and_many
    marks = many.plot["marks"]
    lines = plots.mark_lines(marks, many.timeline.duration_s)
    assert lines.total == 20_000 and lines.count.sum() == 20_000 and len(lines.x_s) <= plots.MAX_MARK_LINES
    # every mark lies within one bin after the line that stands for it
    t = np.array([m[0] for m in marks])
    i = np.searchsorted(lines.x_s, t, side="right") - 1
    assert (i >= 0).all() and (t - lines.x_s[i] < lines.bin_s).all()
    assert f"{len(lines.x_s):,} dotted lines" in lines.note and "20,000 ckprof.mark() events" in lines.note
    assert "id='timeline-marks'" in interactive.timeline_html(many)
    assert "timeline-marks" not in interactive.timeline_html(few)  # all drawn: nothing to say
    exact = plots.mark_lines(few.plot["marks"], few.timeline.duration_s)
    assert exact.note is None and list(exact.x_s) == [m[0] for m in few.plot["marks"]]


def test_a_mark_text_is_cut_for_the_hover_and_a_lone_mark_keeps_its_time():
    marks = [(float(i) / 1000, "x" * 500) for i in range(5000)] + [(59.0, "the lone one")]
    lines = plots.mark_lines(marks, 60.0)
    assert lines.x_s[-1] == 59.0 and lines.text[-1] == "the lone one" and lines.count[-1] == 1
    assert max(len(s) for s in lines.text) <= plots.MAX_MARK_TEXT + 40
    assert json.dumps(lines.text).count("x" * (plots.MAX_MARK_TEXT + 1)) == 0


# -- messages: a user's string never puts control bytes on the terminal (item 9) ------------------

NASTY = "bad\n\x1b[31mname"  # a newline and a terminal escape (ESC [ 31 m: red)


def _one_clean_line(stderr: str, needle: str) -> str:
    """The one line of `stderr` holding `needle`: no control byte in it, the escape shown as text."""
    lines = [ln for ln in stderr.splitlines() if needle in ln]
    assert len(lines) == 1, stderr
    line = lines[0]
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in line), repr(line)
    assert "\\u001b[31m" in line and "\x1b" not in stderr, repr(stderr)
    return line


def test_a_command_not_found_is_one_line_without_control_bytes(tmp_path):
    r = ckprof_cmd("record", "-q", "-o", str(tmp_path / "rec"), "--", NASTY)
    assert r.returncode == 127
    line = _one_clean_line(r.stderr, "command not found")
    assert line == "ckprof: bad \\u001b[31mname: command not found"
    meta = json.loads((tmp_path / "rec" / "meta.json").read_text())
    assert meta["exit"]["error"] == f"{NASTY}: command not found"  # the recording keeps the name as it was


def test_a_recording_directory_with_control_bytes_is_named_in_one_line(tmp_path):
    r = ckprof_cmd("record", "-o", str(tmp_path / f"rec{NASTY}"), "--", "true")
    assert r.returncode == 0, r.stderr
    _one_clean_line(r.stderr, "ckprof: recorded")


def test_a_report_file_with_control_bytes_is_named_in_one_line(tmp_path):
    rec = marked_recording(tmp_path / "rec", 1)
    r = ckprof_cmd("report", rec, "--format", "md", "-o", str(tmp_path / f"out{NASTY}.md"))
    assert r.returncode == 0, r.stderr
    _one_clean_line(r.stderr, "wrote")


@pytest.mark.parametrize(
    "args, needle, code",
    [
        (["report", f"/nonexistent/{NASTY}"], "not a directory", 1),
        (["record", "--device", NASTY, "--", "true"], "unknown --device", 2),
        (["evict", f"/nonexistent/{NASTY}"], "no such file", 2),
    ],
)
def test_a_bad_path_or_device_name_is_one_line_without_control_bytes(args, needle, code):
    r = ckprof_cmd(*args)
    assert r.returncode == code
    _one_clean_line(r.stderr, needle)


def test_doctor_names_a_checkpoint_path_with_control_bytes_in_one_line(tmp_path):
    nasty = tmp_path / NASTY
    nasty.mkdir()
    r = ckprof_cmd("doctor", "--path", str(nasty))
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout
    assert any(str(tmp_path) in ln and "\\u001b[31mname" in ln for ln in r.stdout.splitlines()), r.stdout


# -- reports are written whole or not at all (item 10) -------------------------------------------


@pytest.fixture(scope="module")
def small_rec(tmp_path_factory):
    """A recording whose every output is larger than a page (4 KiB): written onto a full tmpfs,
    it cannot fit in the page that truncating a one-page previous output would free."""
    rb = RecordingBuilder(duration_s=120, interval_s=0.5)
    rb.block("nvme0n1", lambda t: np.where((t % 2) < 1, 100 * MiB, 0))
    for i in range(50):
        rb.checkpoint(2 * i + 0.1, 2 * i + 0.9, 50 * MiB, step=i)
    return rb.finish(tmp_path_factory.mktemp("small") / ("a-long-name-" * 15 + "rec"))


def _previous(fs, outputs) -> dict:
    """Put a small previous output at each of `outputs` (under `fs`); returns their bytes."""
    before = {}
    for o in outputs:
        before[o] = f"the previous {o}, whole\n".encode()
        (fs / o).parent.mkdir(exist_ok=True)
        (fs / o).write_bytes(before[o])
    return before


def _fill(fs):
    fill(fs / "filler")
    return sorted(p.name for p in fs.iterdir())


@pytest.mark.parametrize(
    "args, outputs",
    [
        (["report", "{rec}", "-f", "md", "-o", "{fs}/report.md"], ["report.md"]),
        (["report", "{rec}", "-f", "json", "-o", "{fs}/report.json"], ["report.json"]),
        (["report", "{rec}", "--static", "-o", "{fs}/report.html"], ["report.html"]),
        (["compare", *["{rec}"] * 10, "-f", "json", "-o", "{fs}/cmp.json"], ["cmp.json"]),
        (["export", "{rec}", "-f", "perfetto", "-o", "{fs}/trace.json"], ["trace.json"]),
        (["export", "{rec}", "-f", "csv", "-o", "{fs}/csv"], ["csv/checkpoints.csv", "csv/timeline.csv"]),
        (["export", "{rec}", "-f", "parquet", "-o", "{fs}/pq"], ["pq/checkpoints.parquet", "pq/timeline.parquet"]),
    ],
    ids=["md", "json", "html", "compare", "perfetto", "csv", "parquet"],
)
def test_a_full_disk_leaves_the_previous_output_whole(small_rec, small_fs, args, outputs):
    fs = small_fs("8m")
    argv = [a.format(rec=small_rec, fs=fs) for a in args]
    before = _previous(fs, outputs)  # a previous output, smaller than the new one (a shorter run's)
    names = _fill(fs)
    r = ckprof_cmd(*argv)
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "No space left on device" in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert {o: (fs / o).read_bytes() for o in outputs} == before  # the previous output, whole
    assert sorted(p.name for p in fs.iterdir()) == names  # and no temporary file left
    for sub in {o.split("/")[0] for o in outputs if "/" in o}:
        assert sorted(p.name for p in (fs / sub).iterdir()) == sorted(o.split("/")[1] for o in outputs)


def test_a_job_export_on_a_full_disk_leaves_the_previous_one_whole(small_fs, tmp_path):
    from ckprof.testing import job_dir

    hosts = {}
    for h in ("a", "b"):
        rb = RecordingBuilder(duration_s=20, interval_s=0.5, hostname=h)
        rb.block("nvme0n1", lambda t: np.where((t > 5) & (t < 10), 100 * MiB, 0))
        rb.checkpoint(5, 10, 500 * MiB, step=1)
        hosts[h] = rb
    job = job_dir(tmp_path / "job", hosts)
    fs = small_fs("8m")
    before = _previous(fs, ["job.json", "jobcsv/checkpoints.csv", "jobcsv/timeline.csv"])
    names = _fill(fs)
    for fmt, out in (("perfetto", fs / "job.json"), ("csv", fs / "jobcsv")):
        r = ckprof_cmd("export", str(job), "-f", fmt, "-o", str(out))
        assert r.returncode != 0 and "No space left on device" in r.stderr.splitlines()[-1], r.stderr
    assert {o: (fs / o).read_bytes() for o in before} == before
    assert sorted(p.name for p in fs.iterdir()) == names
    assert sorted(p.name for p in (fs / "jobcsv").iterdir()) == ["checkpoints.csv", "timeline.csv"]


def test_replacing_keeps_a_link_a_link_and_the_file_mode(tmp_path):
    from ckprof.atomic import replacing

    real = tmp_path / "real.md"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "link.md"
    link.symlink_to(real)
    with replacing(str(link)) as f:
        f.write("new")
    assert link.is_symlink() and real.read_text() == "new" and (real.stat().st_mode & 0o777) == 0o640
    with pytest.raises(RuntimeError), replacing(str(real)) as f:  # a failure half way: nothing replaced
        f.write("half")
        raise RuntimeError("interrupted")
    assert real.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["link.md", "real.md"]


def test_a_report_to_dev_stdout_is_written_in_place(small_rec):
    r = ckprof_cmd("report", str(small_rec), "-f", "md", "-o", "/dev/stdout")
    assert r.returncode == 0 and r.stdout.startswith("# ckprof report"), r.stderr
