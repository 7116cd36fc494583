"""The report's provenance (model.Provenance) from meta.json: its `provenance` object and the facts
it references (`provenance.see`: host, ckprof_version, topology, the gpu collector's describe)."""

from __future__ import annotations

from .meta import Meta, Topology
from .model import Provenance, TargetFileSystem


def target_file_systems(topology: Topology) -> list[TargetFileSystem]:
    return [
        TargetFileSystem(
            path=str(chain.path),
            mount_point=chain.mount.mount_point,
            fstype=chain.mount.fstype,
            source=chain.mount.source,
            options=chain.mount.options,
            super_options=chain.mount.super_options,
        )
        for chain in topology.paths
    ]


def gpu_driver(meta: Meta) -> tuple[str | None, str | None]:
    """NVML's driver version and, where null, why."""
    gpu = meta.collectors.gpu
    if gpu is None or not gpu.probe.ok:
        return None, "no GPU recorded"
    d = gpu.describe
    if d.driver_version:
        return d.driver_version, None
    return None, d.driver_version_error or "not recorded by this ckprof"


def provenance(meta: Meta) -> Provenance | None:
    """None for a recording made before meta.json had `provenance`."""
    p = meta.provenance
    if p is None:
        return None
    driver, driver_unknown = gpu_driver(meta)
    return Provenance(
        kernel=meta.host.kernel,
        ckprof_version=meta.ckprof_version,
        python=meta.host.python,
        libraries=p.libraries,
        libraries_unknown=p.libraries_unknown,
        dlio=p.dlio,
        nvme_firmware={disk: i.firmware_rev for disk, i in meta.topology.identity.items()},
        gpu_driver=driver,
        gpu_driver_unknown=driver_unknown,
        file_systems=target_file_systems(meta.topology),
        command_sha256=p.command_sha256,
        config_sha256=p.config_sha256,
        config_not_hashed=p.config_not_hashed,
    )


def lines(prov: Provenance | None) -> list[str]:
    """The report's short provenance section, one item a line (report/render.py: Markdown and HTML)."""
    if prov is None:
        return ["not recorded (a recording made before ckprof wrote provenance)"]
    libs = prov.libraries
    lines = [
        f"kernel {prov.kernel or 'unknown'}, ckprof {prov.ckprof_version or 'unknown'}, "
        f"Python {prov.python or 'unknown'}",
        "libraries: "
        + (
            ", ".join(f"{k} {v}" for k, v in sorted(libs.items())) or "none of those ckprof names"
            if libs is not None
            else f"unknown ({prov.libraries_unknown})"
        ),
    ]
    if prov.dlio is not None:
        d = prov.dlio
        lines.append(
            f"DLIO {d.version}"
            + (f" (commit {d.commit})" if d.commit else "")
            + (f" (archive sha256 {d.archive_sha256})" if d.archive_sha256 else "")
            if d.version
            else f"DLIO: version unknown ({d.unknown})"
        )
    for fs in prov.file_systems:
        lines.append(
            f"{fs.path}: {fs.fstype or 'unknown file system'} on {fs.mount_point}, "
            f"mount options {fs.options or 'unknown'}, super options {fs.super_options or 'unknown'}"
        )
    if prov.nvme_firmware:
        lines.append(
            "disk firmware: " + ", ".join(f"{d} {fw or 'unknown'}" for d, fw in sorted(prov.nvme_firmware.items()))
        )
    lines.append(f"GPU driver: {prov.gpu_driver or f'unknown ({prov.gpu_driver_unknown})'}")
    lines.append(f"command sha256 {prov.command_sha256 or 'unknown'}")
    lines += [f"config {path}: sha256 {h}" for path, h in sorted(prov.config_sha256.items())]
    lines += [f"config {path}: not hashed ({why})" for path, why in sorted(prov.config_not_hashed.items())]
    return lines


# -- what `ckprof compare` flags (issue 26: a tool version moved results 41 %, storage#682) ---------


def differences(a: Provenance | None, b: Provenance | None) -> list[tuple[str, str | None, str | None]]:
    """(what, a's, b's) for each provenance fact that differs between two recordings where it can
    change a checkpoint's cost: the kernel, ckprof, a library's version (installed in one only
    counts), DLIO's version or commit, the GPU driver, each target's file system and mount options
    (targets paired in --path order), the config files' hashes. A fact unknown on either side is
    not a difference (nothing is guessed); a recording without provenance is one line. The
    command's own sha256 is not compared: its -o and paths differ from run to run."""
    if a is None or b is None:
        if a is b:
            return []
        return [("provenance", "recorded" if a else "not recorded", "recorded" if b else "not recorded")]
    out: list[tuple[str, str | None, str | None]] = []

    def differ(what: str, x, y) -> None:
        if x is not None and y is not None and x != y:
            out.append((what, str(x), str(y)))

    differ("kernel", a.kernel, b.kernel)
    differ("ckprof version", a.ckprof_version, b.ckprof_version)
    if a.libraries is not None and b.libraries is not None:
        for name in sorted(set(a.libraries) | set(b.libraries)):
            x, y = a.libraries.get(name), b.libraries.get(name)
            if x != y:
                out.append((f"{name} version", x or "not installed", y or "not installed"))
    if a.dlio is not None and b.dlio is not None:
        differ("DLIO version", a.dlio.version, b.dlio.version)
        differ("DLIO commit", a.dlio.commit, b.dlio.commit)
        differ("DLIO archive", a.dlio.archive_sha256, b.dlio.archive_sha256)
    differ("GPU driver", a.gpu_driver, b.gpu_driver)
    for i, (fa, fb) in enumerate(zip(a.file_systems, b.file_systems)):
        target = fa.path if fa.path == fb.path else f"target {i + 1}"
        differ(f"{target}: file system", fa.fstype, fb.fstype)
        differ(f"{target}: mount options", fa.options, fb.options)
        differ(f"{target}: super options", fa.super_options, fb.super_options)
    ha, hb = sorted(a.config_sha256.values()), sorted(b.config_sha256.values())
    if ha != hb:
        out.append(
            ("config files' sha256", ", ".join(h[:12] for h in ha) or "none", ", ".join(h[:12] for h in hb) or "none")
        )
    return out
