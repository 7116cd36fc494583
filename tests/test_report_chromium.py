"""The HTML report in headless Chromium: its plots load, and the page logs no console errors.

The test adds a probe script to a copy of the report (the report itself has no JavaScript):
on load it counts the images that decoded and logs one console line, which shows that console
capture works before we assert that nothing else was logged. A screenshot is kept in the
test's tmp directory (its path is printed) for a person to look at.
"""

import os
import re
import shutil
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

from ckprof.cli import main
from ckprof.testing import GPU_SCHEMA, NVME_SCHEMA, RecordingBuilder

MiB = 2**20
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PROBE = (
    "<script>window.addEventListener('load',()=>{const im=[...document.images];"
    "document.body.setAttribute('data-plots-loaded',im.filter(i=>i.complete&&i.naturalWidth>0).length);"
    "console.log('ckprof-probe '+im.length)});</script></body>"
)


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip("chromium not installed (apt-get install chromium)")


def make(path):
    rb = RecordingBuilder(path, duration_s=30, command=["python", "train.py", "--out", "/ckpt/<b>&'\""])
    spans = [(4, 7), (12, 15), (20, 23)]
    act = lambda t: sum(np.where((t > a) & (t <= b), 1.0, 0.0) for a, b in spans)  # noqa: E731
    rb.block("nvme0n1", lambda t: act(t) * 800 * MiB * (1 - 0.01 * t), queue=lambda t: act(t) * 16)
    rb.block("nvme1n1", lambda t: act(t) * 780 * MiB, queue=lambda t: act(t) * 15)
    rb.host(lambda t: act(t) * 100 * MiB)
    rb.series(
        "gpu",
        GPU_SCHEMA,
        gpu="0",
        energy_mj=lambda t: t * 3e5 + np.cumsum(act(t)) * 1e4,
        power_w=300,
        util_gpu_pct=lambda t: np.where(act(t) > 0, 2, 97),
        temp_c=lambda t: 55 + 0.3 * t,
        clocks_event_reasons=0,
    )
    rb.series(
        "nvme",
        NVME_SCHEMA,
        device="nvme0",
        temp_c=lambda t: 45 + t,
        critical_warning=0,
        thm_temp1_trans_count=lambda t: (t > 21).astype(int),
        thm_temp1_total_time=lambda t: np.clip(t - 21, 0, None),
        power_w=lambda t: 4 + 5 * act(t),
    )
    for i, (a, b) in enumerate(spans):
        rb.checkpoint(a, b, int(2 * 780 * MiB * (b - a)), step=100 * (i + 1), path=f"/ckpt/step{i}<i>")
    return rb.finish()


def test_html_report_in_headless_chromium(tmp_path):
    exe = chromium()
    rec = make(tmp_path / "rec")
    html = tmp_path / "report.html"
    r = CliRunner().invoke(main, ["report", rec, "-o", str(html), "--gpus", "4096"])
    assert r.exit_code == 0, r.output
    probed = tmp_path / "probed.html"
    probed.write_text(html.read_text().replace("</body>", PROBE))
    prof = tmp_path / "profile"
    dom = subprocess.run(
        [exe, *FLAGS, f"--user-data-dir={prof}", "--enable-logging=stderr", "--v=0", "--dump-dom", probed.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = re.search(r'data-plots-loaded="(\d+)"', dom.stdout)
    assert m and int(m.group(1)) == 3, "the three plots did not all decode"
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert any("ckprof-probe 3" in line for line in console), "console capture did not work"
    errors = [line for line in console if "ckprof-probe" not in line]
    assert errors == []
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            exe,
            *FLAGS,
            f"--user-data-dir={prof}",
            "--hide-scrollbars",
            "--window-size=1400,2600",
            f"--screenshot={shot}",
            html.as_uri(),
        ],
        capture_output=True,
        timeout=120,
    )
    assert shot.exists() and shot.stat().st_size > 20_000
    print(f"screenshot: {shot}")
    os.environ.get("CKPROF_KEEP_SCREENSHOT") and shutil.copy(shot, os.environ["CKPROF_KEEP_SCREENSHOT"])
