"""The QEMU NVMe tier (pytest mark `qemu`): see harness.py and docs/nvme.md."""
