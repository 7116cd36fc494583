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

from support.browser import CHROMIUM_ARGS, chromium
from support.command import ckprof_cmd
from support.recordings import three_saves

MiB = 2**20
FLAGS = ["--headless", *CHROMIUM_ARGS]
PROBE = (
    "<script>window.addEventListener('load',()=>{const im=[...document.images];"
    "document.body.setAttribute('data-plots-loaded',im.filter(i=>i.complete&&i.naturalWidth>0).length);"
    "console.log('ckprof-probe '+im.length)});</script></body>"
)


def test_html_report_in_headless_chromium(tmp_path):
    exe = chromium()
    rec = three_saves(tmp_path / "rec")
    html = tmp_path / "report.html"
    r = ckprof_cmd("report", rec, "-o", str(html), "--gpus", "4096", in_process=True)
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
