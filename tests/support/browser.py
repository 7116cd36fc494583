"""A headless browser for the interactive report's tests."""

import shutil

import pytest

# chromium's flags for a test: no sandbox (root in CI), no GPU, nothing fetched from the network
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip("chromium not installed (apt-get install chromium)")
