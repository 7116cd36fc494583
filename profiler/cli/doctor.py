"""`ckprof doctor`: each collector, whether it can run here and, if not, why and the fix."""

from __future__ import annotations

import os
import re
import shutil

import click

from ckprof.cli.doctor_targets import default_python, is_url, path_lines, url_lines
from ckprof.collectors.nvme_cli import INSTALL_HINT
from ckprof.collectors.topology import Topology
from ckprof.errors import UsageError
from ckprof.escape import visible
from ckprof.record.sources import SourceOptions, build_sources

# What the nvme and nvme_hwmon collectors record (docs/nvme.md), said where there is no NVMe.
NVME_MEASURES = (
    "temperature: the composite and up to 8 sensors (hwmon at up to 10 Hz, and the SMART log)",
    "thermal throttling: time above the warning/critical temperatures, thermal-management "
    "transitions and the time spent in them",
    "the power state, and each change of it as an event",
    "data units read and written, host commands, controller busy time",
    "critical warnings (spare, temperature, reliability, read-only), and each change as an event",
    "SSD power: the Power Measurement log (25h) or interval power where the drive supports them, "
    "else an estimate from the power-state table",
)


def nvme_controllers(sys_root: str = "/sys") -> list[str]:
    """nvme0, nvme1, … under /sys/class/nvme (Documentation/ABI/testing/sysfs-class-nvme)."""
    try:
        names = os.listdir(os.path.join(sys_root, "class", "nvme"))
    except OSError:
        return []
    return sorted((n for n in names if re.fullmatch(r"nvme\d+", n)), key=lambda n: int(n[4:]))


def nvme_lines(probes: dict, sys_root: str = "/sys", nvme_bin: str = "nvme") -> list[str]:
    """Whether NVMe is recorded here; where it is not, what would be, and how to enable it."""
    ctrls = nvme_controllers(sys_root)
    if "nvme" in probes:  # controllers behind the path: their probe lines above say the rest
        return [f"NVMe: {', '.join(ctrls)} here; see the nvme and nvme_hwmon lines above"]
    if ctrls:
        head = [
            f"NVMe: {', '.join(ctrls)} here, but none behind the checkpoint path: record with "
            f"--path on a file system on it, or --device {ctrls[0]}n1"
        ]
    else:
        head = [
            "NVMe: no NVMe controller on this machine (none under /sys/class/nvme)",
            "  with one behind the checkpoint path, ckprof records:",
        ]
        head += [f"    - {m}" for m in NVME_MEASURES]
    cli = shutil.which(nvme_bin)
    return head + [
        "  it needs:",
        "    - nvme-cli: " + (f"found ({cli})" if cli else f"not installed: {INSTALL_HINT}"),
        "    - root: "
        + (
            "yes"
            if os.geteuid() == 0
            else "no: run ckprof as root (SMART, power state and power logs are admin "
            "commands: CAP_SYS_ADMIN); temperature alone needs neither (hwmon, Linux 5.5+)"
        ),
    ]


def identity_line(topo: Topology, disk: str) -> str | None:
    ident = topo.identity(disk)
    parts = [f"{k} {ident[k]} ({ident['source'][k]})" for k in ("model", "serial", "wwn", "firmware_rev") if ident[k]]
    return f"{disk}: " + ", ".join(parts) if parts else None


def diagnose(paths: list[str], python: str | None = None, probe: bool = False) -> str:
    urls = [p for p in paths if is_url(p)]
    paths = [p for p in paths if not is_url(p)] or ([] if urls else [os.getcwd()])
    lines = ["Collectors" + ("" if paths else " (for the working directory: the targets are not local paths)") + ":"]
    sources = build_sources(SourceOptions(paths=paths or [os.getcwd()], devices=[]))
    for name, p in sources.probes.items():
        mark = "ok  " if p["ok"] else "no  "
        lines.append(f"  {mark}{name:<8} {p['detail']}")
        if p.get("hint"):
            lines.append(f"            fix: {p['hint']}")
    skipped = tuple(f"{name}: skipped:" for name in sources.probes)
    for n in sources.notes:
        if not n.startswith(skipped):  # the probe line above already says it
            lines.append(f"  note: {n}")
    lines.append("")
    lines += nvme_lines(sources.probes)
    lines.append("")
    lines.append("Devices behind the checkpoint path (mount → partition/dm → disk → controller):")
    topo = Topology()
    disks: list[str] = []
    targets: list[str] = []  # what is recorded on a target with no local disk (doctor_targets)
    for u in urls:
        lines.append(f"  {u}: not a local path: no device")
        targets += url_lines(u, python or default_python(), probe)
    for p in paths:
        try:
            res = topo.resolve(p)
        except UsageError as e:
            lines.append(f"  {e}")
            continue
        lines += ["  " + ln for ln in res.describe()]
        disks += [d for d in res.devices if d not in disks]
        targets += path_lines(p, topo)
    idents = [ln for d in disks if (ln := identity_line(topo, d))]
    if idents:
        lines.append("Identity (udev database, else sysfs):")
        lines += ["  " + ln for ln in idents]
    if targets:
        lines.append("")
        lines.append("Targets with no local disk (what ckprof record records there, and what not):")
        lines += ["  " + ln for ln in targets]
    lines.append("")
    lines.append("Disks here: " + (", ".join(topo.disks()) or "none"))
    # each line made visible (ckprof.escape): a path's newline or terminal escape stays in its line
    return "\n".join(visible(line) for line in lines)


@click.command()
@click.option(
    "--path",
    "paths",
    multiple=True,
    metavar="PATH",
    help="Show the devices behind PATH, or what is recorded on an NFS, FUSE or tmpfs PATH or an s3:// URL "
    "[default: working directory].",
)
@click.option(
    "--python",
    metavar="PYTHON",
    help="For an s3:// PATH: the Python that will run the program, checked for boto3/botocore/s3fs "
    "[default: python3 on PATH].",
)
@click.option(
    "--probe",
    is_flag=True,
    help="For an s3:// PATH: send one LIST to the bucket (5 s timeout) to say whether credentials work.",
)
def doctor(paths, python, probe):
    """Say which collectors can run here, why not, and how to fix it; show the device topology."""
    click.echo(diagnose(list(paths), python=python, probe=probe))
