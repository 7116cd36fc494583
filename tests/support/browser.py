"""A headless browser for the interactive report's tests."""

import shutil

import pytest


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip("chromium not installed (apt-get install chromium)")
