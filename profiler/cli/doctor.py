"""`ckprof doctor`: each collector, whether it can run here and, if not, why and the fix."""
from __future__ import annotations

import click

import os

from ckprof.collectors.topology import Topology
from ckprof.errors import UsageError
from ckprof.record.sources import SourceOptions, build_sources


def diagnose(paths: list[str]) -> str:
    paths = paths or [os.getcwd()]
    lines = ["Collectors:"]
    sources = build_sources(SourceOptions(paths=paths, devices=[]))
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
    lines.append("Devices behind the checkpoint path (mount → partition/dm → disk → controller):")
    topo = Topology()
    for p in paths:
        try:
            lines += ["  " + ln for ln in topo.resolve(p).describe()]
        except UsageError as e:
            lines.append(f"  {e}")
    lines.append("")
    lines.append("Disks here: " + (", ".join(topo.disks()) or "none"))
    return "\n".join(lines)


@click.command()
@click.option("--path", "paths", multiple=True, metavar="PATH", help="Show the devices behind PATH [default: working directory].")
def doctor(paths):
    """Say which collectors can run here, why not, and how to fix it; show the device topology."""
    click.echo(diagnose(list(paths)))
