"""`ckprof doctor --path` on a target with no local disk behind it: an object store URL (s3://, and
fsspec's other schemes), an NFS mount, a FUSE mount, tmpfs. For each, what `ckprof record` will
record there, what it will not, why, and the fix where there is one (docs/remote.md).

Each rule has its home elsewhere and is only read here: a URL's kind is the durability analysis'
(analysis/durability.py storage_of; OBJECT_SCHEMES in recording/fstypes.py); a file system's kind is recording/fstypes.py's
table (statfs(2) f_type through record/fskind.py); the mount is collectors/topology.py's
(/proc/self/mountinfo); an NFS mount's export, version and transport are collectors/nfs_parse.py's
(/proc/self/mountstats); a FUSE mount's connection, daemon and control file system are
collectors/fuse.py's (FuseCollector.probe).

No network by default: the Python check asks botocore what it would use with the instance metadata
service disabled (AWS_EC2_METADATA_DISABLED); only `--probe` sends one LIST to the bucket.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from ckprof.analysis.durability import storage_of
from ckprof.collectors.fuse import FuseCollector, FuseMount, is_fuse
from ckprof.collectors.nfs import SOURCE as MOUNTSTATS
from ckprof.collectors.nfs_parse import NFS_FSTYPES, parse_mountstats
from ckprof.collectors.topology import Mount, Topology
from ckprof.record.fskind import magic_of
from ckprof.recording.fstypes import OBJECT_SCHEMES, S3_SCHEMES, TABLE, kind_of

PROBE_TIMEOUT_S = 5  # one LIST: connect and read timeouts, no retry
CHECK_TIMEOUT_S = 30  # the child Python's start, imports and (with --probe) its one request
S3_MODULES = ("boto3", "botocore", "s3transfer", "aiobotocore", "s3fs", "fsspec", "s3torchconnector")

# Run in the Python that will run the command: what it can import, and botocore's own answer for
# the endpoint and where credentials come from (no request is sent: instance metadata disabled).
_CHECK = r"""
import importlib.metadata as md, importlib.util as iu, json, sys
out = {"executable": sys.executable, "version": sys.version.split()[0], "modules": {}}
for name in sys.argv[1].split(","):
    try:
        found = iu.find_spec(name) is not None
    except Exception:
        found = False
    try:
        out["modules"][name] = md.version(name) if found else None
    except Exception:
        out["modules"][name] = "installed" if found else None
if out["modules"].get("botocore"):
    try:
        import botocore.session
        s = botocore.session.Session()
        out["region"] = s.get_config_variable("region")
        c = s.get_credentials()
        out["credentials"] = getattr(c, "method", None) if c else None
        kw = {} if out["region"] else {"region_name": "us-east-1"}
        if c is None:
            kw.update(aws_access_key_id="-", aws_secret_access_key="-")  # only to build the client
        out["endpoint"] = s.create_client("s3", **kw).meta.endpoint_url
    except Exception as e:
        out["botocore_error"] = f"{type(e).__name__}: {e}"
if len(sys.argv) > 2:  # --probe: one LIST of the prefix, 5 s timeouts, no retry
    bucket, _, prefix = sys.argv[2].partition("/")
    try:
        import boto3
        from botocore.config import Config
        cfg = Config(connect_timeout=int(sys.argv[3]), read_timeout=int(sys.argv[3]), retries={"max_attempts": 1})
        r = boto3.client("s3", config=cfg).list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
        out["probe"] = {"ok": True, "keys": r.get("KeyCount", 0)}
    except Exception as e:
        code = getattr(e, "response", {}).get("Error", {}).get("Code")
        out["probe"] = {"ok": False, "error": code or type(e).__name__, "message": str(e)[:300]}
print(json.dumps(out))
"""


def is_url(path: str) -> bool:
    """A target with a scheme (s3://, gs://, http://, ...; not file://): not on this machine's file
    systems (the durability analysis' rule)."""
    storage = storage_of(path, [])
    return storage.kind in ("object", "unrecognised") and str(storage.file_system).endswith("://")


def default_python() -> str:
    """The Python `ckprof record -- python3 train.py` would run: python3 on PATH, else this one."""
    return shutil.which("python3") or shutil.which("python") or sys.executable


def python_check(python: str, probe: str | None = None) -> dict:
    """What `python` can import of the S3 stack, botocore's endpoint and credential source there;
    with `probe` ("bucket/prefix"), one LIST's outcome. {"error": why} when it cannot be asked."""
    args = [python, "-c", _CHECK, ",".join(S3_MODULES)]
    env = dict(os.environ)
    if probe is None:
        env["AWS_EC2_METADATA_DISABLED"] = "true"  # botocore's credential chain would ask 169.254.169.254
    else:
        args += [probe, str(PROBE_TIMEOUT_S)]
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": f"cannot run {python}: {e}"}
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"{python} exited {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1]}"}


def url_lines(url: str, python: str, probe: bool = False) -> list[str]:
    storage = storage_of(url, [])
    scheme = str(storage.file_system)
    head = f"{url}: not a local path ({scheme}): no mount, no device"
    if storage.kind != "object":
        return [
            head + f"; {scheme} is not an object store ckprof knows ({', '.join(sorted(OBJECT_SCHEMES))})",
            "  NOT recorded: its requests and its saves' durability (unknown); the network interfaces are (net)",
        ]
    is_s3 = scheme.removesuffix("://") in S3_SCHEMES
    lines = [head, "  recorded by `ckprof record -- COMMAND`, with no change to the program:"]
    if is_s3:
        lines += [
            "    - each S3 request through botocore or aiobotocore (boto3, s3transfer, s3fs/fsspec): an "
            "s3_request event (operation, bucket, key, bytes, latency, HTTP status, retries, errors; "
            "more than 200 a second of one operation are summed per second)",
            "    - a save's durable end: its upload's completion (PutObject or CompleteMultipartUpload "
            'returned without error: durable "in the object store")',
            "    - s3torchconnector (its own CRT client): one s3_request per object written (from the "
            "writer's creation to its close, the bytes written) or read (the bytes returned), per "
            "HeadObject, DeleteObject, CopyObject; a writer's close is the save's durable end",
        ]
    else:
        lines.append(
            "    - a save through an fsspec file: its window ends when the upload completes (the file's close)"
        )
    lines.append("    - the network interfaces (net): bytes, packets, errors and drops each way")
    lines.append("  NOT recorded:")
    lines.append("    - device bandwidth and queue depth: n/a (no device on this machine holds the objects)")
    lines.append(
        "    - durability beyond the upload's completion (the store's own replication and disks are not visible)"
    )
    if is_s3:
        lines.append(
            "    - s3torchconnector's own parts, retries and HTTP status (inside its CRT client), its "
            "LISTs; requests made with raw HTTP"
        )
    else:
        lines.append(f"    - the requests themselves: only botocore's S3 clients are instrumented, not {scheme}'s")
    check = python_check(python, url.split("://", 1)[1] if probe and is_s3 else None)
    lines += _python_lines(check, python, is_s3)
    if is_s3:
        lines += _probe_lines(check, url, probe)
    lines.append(
        "  record's --path takes local directories: leave it out (the working directory) and give the "
        f"{scheme} target to the program"
    )
    return lines


def _python_lines(check: dict, python: str, is_s3: bool) -> list[str]:
    if "error" in check:
        return [f"  Python checked: {python}: {check['error']} (name the program's Python with --python)"]
    mods = check["modules"]
    have = ", ".join(f"{m} {v}" for m, v in mods.items() if v) or "none"
    missing = ", ".join(m for m, v in mods.items() if not v) or "none"
    out = [
        f"  Python checked: {check['executable']} (Python {check['version']}; another with --python):",
        f"    importable: {have}",
        f"    not importable: {missing}",
    ]
    if is_s3 and not mods.get("botocore"):
        out.append(
            "    no botocore there: no S3 request is recorded from a program it runs; fix: "
            f"{check['executable']} -m pip install boto3 (or s3fs)"
        )
    if not is_s3:
        return out
    set_by = [v for v in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL") if os.environ.get(v)]
    if check.get("endpoint"):
        how = f"set by {set_by[0]}" if set_by else "botocore's configuration"
        out.append(f"  endpoint: {check['endpoint']} ({how}; region {check.get('region') or 'not set'})")
    elif set_by:
        out.append(f"  endpoint: {os.environ[set_by[0]]} ({set_by[0]})")
    else:
        out.append("  endpoint: not known here (no botocore to ask; AWS_ENDPOINT_URL not set)")
    if check.get("botocore_error"):
        out.append(f"    botocore could not build a client: {check['botocore_error']}")
    if mods.get("botocore") and "credentials" in check:
        out.append(
            "  credentials: "
            + (
                f"found ({check['credentials']})"
                if check["credentials"]
                else "none in the environment or config files (instance metadata not asked; --probe asks it)"
            )
        )
    return out


def _probe_lines(check: dict, url: str, probe: bool) -> list[str]:
    if not probe:
        return ["  probe: none sent (no network by surprise); --probe sends one LIST to the bucket (5 s timeout)"]
    p = check.get("probe")
    if p is None:
        return ["  probe: not sent: the checked Python cannot (see above)"]
    if p["ok"]:
        return [
            f"  probe: one LIST of {url}: answered, credentials work ({p['keys']} key(s) at the prefix, max 1 asked)"
        ]
    return [f"  probe: one LIST of {url} failed: {p['error']}: {p['message']}"]


def _kind_by_name(fstype: str) -> str | None:
    """recording/fstypes.py's kind for a mount's fstype name (nfs4 → nfs, fuse.bindfs → fuse)."""
    name = "nfs" if fstype in NFS_FSTYPES else "fuse" if is_fuse(fstype) else fstype
    return next((kind for n, kind in TABLE.values() if n == name), None)


def path_lines(path: str, topo: Topology, mountstats: str = "/proc/self/mountstats") -> list[str]:
    """What is recorded on a local `path` whose storage is not a local disk (NFS, FUSE, memory,
    another network or stacked file system); [] for a block device's file system (the device
    lines say it)."""
    mount = topo.mount_of(path)
    if mount is None:
        return []
    magic = magic_of(path)
    kind, fs_name = kind_of(magic) if magic is not None else (_kind_by_name(mount.fstype), mount.fstype)
    if is_fuse(mount.fstype):
        return _fuse_lines(path, mount, topo)
    if mount.fstype in NFS_FSTYPES:
        return _nfs_lines(path, mount, mountstats)
    if kind == "memory":
        return [
            f"{path}: {mount.fstype} on {mount.mount_point}: no storage behind it (memory only)",
            "  a save there is never durable: its pages are never written anywhere (durable: false)",
            "  NOT recorded: device bandwidth and queue depth (n/a: no device)",
        ]
    if kind == "network":
        return [
            f"{path}: {fs_name} ({mount.source}) on {mount.mount_point}: a network file system with no collector "
            "of its own: only the network interfaces (net) show its traffic",
            '  durable: "on the server" (cachestat(2): the client holds no dirty or writeback page)',
        ]
    if kind == "stacked":
        return [
            f"{path}: {fs_name} on {mount.mount_point}: stacked on another file system",
            "  durable: unknown: cachestat(2) sees the upper file, clean while the file system below may hold "
            "its data dirty",
        ]
    return []


def _nfs_lines(path: str, mount: Mount, mountstats: str) -> list[str]:
    try:
        with open(mountstats, errors="replace") as f:
            stats = parse_mountstats(f.read(), ops=False)
    except OSError as e:
        stats, why = [], f"cannot read {mountstats}: {e.strerror}"
    else:
        why = f"not listed in {MOUNTSTATS}"
    m = next((s for s in stats if s.mount_point == mount.mount_point), None)
    if m is None:
        head = f"{path}: NFS ({mount.source}, {mount.fstype}) on {mount.mount_point}: {why}"
    else:
        vers = m.opts.get("vers") or ("4" if m.fstype == "nfs4" else "unknown")
        head = (
            f"{path}: NFS {m.export}, version {vers}, protocol {m.protocol or 'unknown'}, "
            f"on {m.mount_point} ({MOUNTSTATS})"
        )
    return [
        head,
        "  recorded: the nfs collector (per RPC operation: ops, bytes sent and received, RTT, execute and queue "
        "time, retransmits, timeouts) and nfs_mount (application and server bytes, the transport's backlog); "
        "per checkpoint: bytes sent, ops, mean and max RTT, retransmits, GiB/s to the server; the network "
        "interfaces (net)",
        '  durable: "on the server": the client holds no dirty or writeback page of the save\'s files '
        "(cachestat(2); NFS counts pages not yet COMMITted as writeback since Linux 5.8)",
        "  NOT recorded: device bandwidth and queue depth (the server's disks are not visible from here)",
        "  NOT recorded: file activity (fanotify): the kernel refuses fanotify's marks on NFS (the file system "
        "cannot report file handles); saves are found from ckprof.checkpoint() markers and the save calls "
        "ckprof patches (torch.save, ...) instead",
    ]


def _fuse_lines(path: str, mount: Mount, topo: Topology) -> list[str]:
    fm = FuseMount(mount.mount_point, mount.major_minor, mount.fstype, mount.source)
    collector = FuseCollector([fm], sys_root=topo.sys_root, proc_root=topo.proc_root)
    try:
        probe = collector.probe()
        found = collector.describe()["mounts"][fm.mount_point]  # the daemon as the collector found it
        pids = found["daemon_pids"] or []
        how = found.get("daemon_found_by") or found.get("daemon_unknown")
    finally:
        collector.close()
    out = [
        f"{path}: FUSE ({mount.source}, {mount.fstype}) on {mount.mount_point}, connection {fm.connection}",
        "  daemon: " + (f"pid {', '.join(map(str, pids))} ({how})" if pids else f"not found: {how}"),
    ]
    if probe.ok:
        out.append(
            "  recorded: the fuse collector: the connection's waiting requests (queue depth) and the daemon's "
            "I/O (/proc/PID/io" + ("" if pids else ": null while the daemon is not found") + ")"
        )
    else:
        out.append(f"  NOT recorded: the fuse collector: {probe.detail}")
        if probe.hint:
            out.append(f"            fix: {probe.hint}")
    out += [
        "  durable: unknown: the backing file is not visible to ckprof (cachestat(2) of the FUSE file is clean "
        "while the file system below may hold its data dirty)",
        "  NOT recorded: a block device's bandwidth and queue depth (the daemon writes wherever it writes; name "
        "its backing disk with --device to record that)",
    ]
    return out
