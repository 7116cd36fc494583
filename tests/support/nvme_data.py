"""NVMe test data: the captured `nvme` outputs in tests/data/nvme, and an OCP C0h log page built
from the spec's offsets."""

import os

from ckprof.collectors.nvme_parse import OCP_C0_LEN
from support.system import DATA as _TESTS_DATA

DATA = os.path.join(_TESTS_DATA, "nvme")


def read(*parts):
    with open(os.path.join(DATA, *parts)) as f:
        return f.read()


def ocp_c0_bytes(events, status, ps_changes, guid=True):
    """C0h built from OCP Datacenter NVMe SSD spec 2.0 §4.8.3 offsets, independently of the parser."""
    b = bytearray(OCP_C0_LEN)
    b[96] = events  # Thermal Throttling Status and Count, byte 96
    b[97] = status  # byte 97: current throttling status
    b[200:208] = ps_changes.to_bytes(8, "little")  # Power State Change Count, bytes 207:200
    b[494:496] = (3).to_bytes(2, "little")  # Log Page Version (2.0: 3)
    if guid:  # Log Page GUID AFD514C97C6F4F9CA4F2BFEA2810AFC5h
        b[496:512] = int("AFD514C97C6F4F9CA4F2BFEA2810AFC5", 16).to_bytes(16, "little")
    return bytes(b)
