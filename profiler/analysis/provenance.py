"""The report's provenance (model.Provenance) from meta.json: its `provenance` object and the facts
it references (`provenance.see`: host, ckprof_version, topology, the gpu collector's describe)."""

from __future__ import annotations

from .model import DlioProvenance, Provenance, TargetFileSystem


def _dict(d, key) -> dict:
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, dict) else {}


def target_file_systems(topology: dict) -> list[TargetFileSystem]:
    out = []
    for chain in topology.get("paths") or []:
        if not isinstance(chain, dict):
            continue
        m = _dict(chain, "mount")
        out.append(
            TargetFileSystem(
                path=str(chain.get("path")),
                mount_point=m.get("mount_point"),
                fstype=m.get("fstype"),
                source=m.get("source"),
                options=m.get("options"),
                super_options=m.get("super_options"),
            )
        )
    return out


def gpu_driver(meta: dict) -> tuple[str | None, str | None]:
    """NVML's driver version and, where null, why."""
    gpu = _dict(_dict(meta, "collectors"), "gpu")
    if not gpu or not _dict(gpu, "probe").get("ok"):
        return None, "no GPU recorded"
    d = _dict(gpu, "describe")
    if d.get("driver_version"):
        return d["driver_version"], None
    return None, d.get("driver_version_error") or "not recorded by this ckprof"


def provenance(meta: dict) -> Provenance | None:
    """None for a recording made before meta.json had `provenance`."""
    p = meta.get("provenance")
    if not isinstance(p, dict):
        return None
    host, topology = _dict(meta, "host"), _dict(meta, "topology")
    dlio = _dict(p, "dlio")
    driver, driver_unknown = gpu_driver(meta)
    return Provenance(
        kernel=host.get("kernel"),
        ckprof_version=meta.get("ckprof_version"),
        python=host.get("python"),
        libraries=p.get("libraries"),
        libraries_unknown=p.get("libraries_unknown"),
        dlio=DlioProvenance(dlio.get("version"), dlio.get("commit"), dlio.get("unknown")) if dlio else None,
        nvme_firmware={disk: (i or {}).get("firmware_rev") for disk, i in _dict(topology, "identity").items()},
        gpu_driver=driver,
        gpu_driver_unknown=driver_unknown,
        file_systems=target_file_systems(topology),
        command_sha256=p.get("command_sha256"),
        config_sha256=p.get("config_sha256") or {},
        config_not_hashed=p.get("config_not_hashed") or {},
    )


def markdown_lines(prov: Provenance | None) -> list[str]:
    """The report's short provenance section (report/render.py)."""
    if prov is None:
        return ["- not recorded (a recording made before ckprof wrote provenance)"]
    libs = prov.libraries
    lines = [
        f"- kernel {prov.kernel or 'unknown'}, ckprof {prov.ckprof_version or 'unknown'}, "
        f"Python {prov.python or 'unknown'}",
        "- libraries: "
        + (
            ", ".join(f"{k} {v}" for k, v in sorted(libs.items())) or "none of those ckprof names"
            if libs is not None
            else f"unknown ({prov.libraries_unknown})"
        ),
    ]
    if prov.dlio is not None:
        d = prov.dlio
        lines.append(
            f"- DLIO {d.version}" + (f" (commit {d.commit})" if d.commit else "")
            if d.version
            else f"- DLIO: version unknown ({d.unknown})"
        )
    for fs in prov.file_systems:
        lines.append(
            f"- {fs.path}: {fs.fstype or 'unknown file system'} on {fs.mount_point}, "
            f"mount options {fs.options or 'unknown'}, super options {fs.super_options or 'unknown'}"
        )
    if prov.nvme_firmware:
        lines.append(
            "- disk firmware: " + ", ".join(f"{d} {fw or 'unknown'}" for d, fw in sorted(prov.nvme_firmware.items()))
        )
    lines.append(f"- GPU driver: {prov.gpu_driver or f'unknown ({prov.gpu_driver_unknown})'}")
    lines.append(f"- command sha256 {prov.command_sha256 or 'unknown'}")
    lines += [f"- config {path}: sha256 {h}" for path, h in sorted(prov.config_sha256.items())]
    lines += [f"- config {path}: not hashed ({why})" for path, why in sorted(prov.config_not_hashed.items())]
    return lines
