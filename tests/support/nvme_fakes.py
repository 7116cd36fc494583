"""Test helpers for the NVMe collectors: a fake `nvme` executable and a sysfs tree in tmp_path.

The fake nvme is a real shell script run as a real subprocess (not a mock): it prints captured
nvme-cli output (tests/data/nvme) or misbehaves the ways a real nvme-cli can: hangs, exits 1 with
nvme-cli's own error text, prints garbage.
"""

import os
import stat

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "nvme")
QEMU = os.path.join(DATA, "qemu")

MODES = {
    # smart-log, id-ctrl, get-feature, get-log: what each subcommand does
    "good": {
        "smart-log": f'cat "{QEMU}/smart-log.after-io.json"',
        "id-ctrl": f'cat "{QEMU}/id-ctrl.json"',
        "get-feature": f'cat "{QEMU}/get-feature-2.plain.txt"',
        # QEMU's controller has no OCP log: nvme-cli 2.3's answer, captured in the guest
        "get-log": 'echo "NVMe status: Invalid Field in Command: A reserved coded value or an unsupported value in a defined field(0x4002)" >&2; exit 2',
    },
    "hang": {"*": "sleep 60"},
    "denied": {"*": 'echo "open: Permission denied" >&2; exit 1'},
    "fails": {"*": 'echo "NVMe status: Internal Error(0x6)" >&2; exit 6'},
    "garbage": {"*": 'printf "\\001\\002 not json at all"'},
    "truncated": {"*": "printf '{\"temperature\": 32'"},
}


def fake_nvme(directory, mode="good", overrides=None, name="nvme"):
    """Write an executable `nvme` into `directory` behaving as MODES[mode] (+ overrides)."""
    cases = dict(MODES[mode])
    cases.update(overrides or {})
    lines = ["#!/bin/sh", "# fake nvme-cli for ckprof tests", 'case "$1" in']
    for sub, body in cases.items():
        lines.append(f"  {sub}) {body} ;;")
    lines += ['  *) echo "fake nvme: unknown subcommand $1" >&2; exit 1 ;;', "esac", "exit 0"]
    path = os.path.join(str(directory), name)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def by_args(cases, default='echo "fake nvme: unexpected $*" >&2; exit 1', calls=None):
    """A subcommand body that picks by its arguments: {"--log-id=0x25": 'cat "pm.bin"', ...}
    (substring of "$*", first match wins). With `calls`, each call's arguments are appended to
    that file, so a test can count what was asked."""
    lines = [f'echo "$*" >> "{calls}";'] if calls else []
    lines.append('case "$*" in')
    for needle, body in cases.items():
        lines.append(f"    *'{needle}'*) {body} ;;")
    lines.append(f"    *) {default} ;;")
    lines.append("  esac")
    return " ".join(lines)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def sysfs_nvme_tree(
    root,
    ctrl="nvme0",
    ns="nvme0n1",
    temps=((1, "Composite", 49850),),
    alarm=0,
    hwmon_under_device=False,
    partition=None,
):
    """A /sys (and /proc) tree as Linux 6.1 lays it out for one NVMe controller and namespace.

    /sys/class/block/nvme0n1/device → /sys/devices/pci0000:00/0000:00:02.0/nvme/nvme0 (what
    Topology.controller_of follows); /sys/class/nvme/nvme0/hwmon0/temp*_input in m°C.
    """
    root = str(root)
    sys_root = os.path.join(root, "sys")
    ctrl_dir = os.path.join(sys_root, "devices", "pci0000:00", "0000:00:02.0", "nvme", ctrl)
    ns_dir = os.path.join(ctrl_dir, ns)
    write(os.path.join(ns_dir, "size"), "131072\n")
    write(os.path.join(ns_dir, "stat"), "3 0 24 48 0 0 0 0 0 40 48 0 0 0 0 0 0\n")
    write(os.path.join(ns_dir, "inflight"), "0 0\n")
    os.makedirs(os.path.join(sys_root, "class", "block"), exist_ok=True)
    os.makedirs(os.path.join(sys_root, "class", "nvme"), exist_ok=True)
    os.symlink(ns_dir, os.path.join(sys_root, "class", "block", ns))
    os.symlink(ctrl_dir, os.path.join(ns_dir, "device"))
    os.symlink(ctrl_dir, os.path.join(sys_root, "class", "nvme", ctrl))
    if partition:
        pdir = os.path.join(ns_dir, partition)
        write(os.path.join(pdir, "partition"), "1\n")
        write(os.path.join(pdir, "stat"), "0 0 0 0 0 0 0 0 0 0 0\n")
        os.symlink(pdir, os.path.join(sys_root, "class", "block", partition))
    hw = os.path.join(ctrl_dir, "device", "hwmon", "hwmon3") if hwmon_under_device else os.path.join(ctrl_dir, "hwmon3")
    write(os.path.join(hw, "name"), "nvme\n")
    for n, label, milli in temps:
        write(os.path.join(hw, f"temp{n}_input"), f"{milli}\n")
        write(os.path.join(hw, f"temp{n}_label"), f"{label}\n")
        if n == 1:
            write(os.path.join(hw, "temp1_alarm"), f"{alarm}\n")
            write(os.path.join(hw, "temp1_max"), "69850\n")
            write(os.path.join(hw, "temp1_crit"), "99850\n")
            write(os.path.join(hw, "temp1_min"), "-273150\n")
    proc_root = os.path.join(root, "proc")
    write(os.path.join(proc_root, "diskstats"), f" 259       0 {ns} 3 0 24 48 0 0 0 0 0 40 48 0 0 0 0 0 0\n")
    write(os.path.join(proc_root, "meminfo"), "MemTotal: 1000 kB\nMemAvailable: 500 kB\nDirty: 0 kB\nWriteback: 0 kB\n")
    write(os.path.join(proc_root, "self", "mountinfo"), "")
    return sys_root, proc_root, hw
