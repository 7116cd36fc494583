"""What a recording was made with (meta.json `provenance`, docs/recording-format.md): the command's
library versions, DLIO's version or commit, hashes of the command and of its config files.

Written once at the start, so it must be cheap: no import of the libraries it names, no
subprocess. Versions are read from the `.dist-info` / `.egg-info` directories on this
interpreter's sys.path, the first of a name winning, as importlib.metadata.version does (the
"Recording installed projects" spec, packaging.python.org: `{name}-{version}.dist-info`). They are
the command's only when the command runs this interpreter; otherwise they are unknown, with why.

Facts recorded elsewhere in meta.json are referenced, not copied (`see`): the kernel and Python
(`host`), ckprof's version, the disks' firmware (`topology.identity`), each --path's file system
and mount options (`topology.paths[].mount`), the GPU driver (`collectors.gpu.describe`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
from collections.abc import Mapping

from ckprof.recording import hydra

# the libraries whose version changes a checkpoint's cost (issue 26: a tool version moved results 41 %)
LIBRARIES = (
    "torch",
    "numpy",
    "transformers",
    "lightning",
    "pytorch-lightning",
    "safetensors",
    "boto3",
    "botocore",
    "s3fs",
    "fsspec",
    "dlio_benchmark",
    "megatron-core",
    "nvidia-ml-py",
    "mpi4py",
)
LAUNCHER_ARGS = 32  # how far into the argv a launcher's Python command is looked for
CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml", ".cfg", ".ini")
CONFIG_MAX_BYTES = 1 << 20  # 1 MiB: a bigger file is not a config, and hashing it would slow the start
SEE = {
    "kernel": "host.kernel",
    "python": "host.python",
    "ckprof": "ckprof_version",
    "nvme_firmware": "topology.identity.<disk>.firmware_rev",
    "file_systems": "topology.paths[].mount (fstype, options, super_options)",
    "gpu_driver": "collectors.gpu.describe.driver_version",
}


def normalized(name: str) -> str:
    """A project name as the packaging spec compares them (PEP 503: runs of -_. are one -)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed(names=LIBRARIES, path: list[str] | None = None) -> dict[str, tuple[str, str]]:
    """{name: (version, metadata directory)} of those of `names` installed on `path` (sys.path)."""
    want = {normalized(n): n for n in names}
    found: dict[str, tuple[str, str]] = {}
    for entry in sys.path if path is None else path:
        try:
            listing = os.listdir(entry or ".")
        except OSError:
            continue
        for d in listing:
            if not d.endswith((".dist-info", ".egg-info")):
                continue
            stem = d.rsplit(".", 1)[0]
            name, _, version = stem.partition("-")
            key = normalized(name)
            if key not in want or want[key] in found:
                continue
            full = os.path.join(entry or ".", d)
            if d.endswith(".egg-info") or not version:  # egg-info names carry -pyX.Y; read its metadata
                version = metadata_version(full) or version.split("-")[0]
            if version:
                found[want[key]] = (version, full)
    return found


def metadata_version(meta_dir: str) -> str | None:
    """The Version: header of a metadata directory's METADATA / PKG-INFO (core metadata spec)."""
    for f in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(meta_dir, f), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
                    if not line.strip():
                        break
        except OSError:
            continue
    return None


def install_source(meta_dir: str) -> tuple[str | None, str | None]:
    """Where a project was installed from (direct_url.json, PEP 610): the git commit
    (`vcs_info.commit_id`, installed from git) and the archive's sha256 (`archive_info.hashes`,
    installed from a wheel or sdist by URL or path), each None where the install does not say."""
    import json

    try:
        with open(os.path.join(meta_dir, "direct_url.json")) as f:
            url = json.load(f)
        commit = (url.get("vcs_info") or {}).get("commit_id")
        archive = url.get("archive_info") or {}
        sha = (archive.get("hashes") or {}).get("sha256")
        if sha is None and str(archive.get("hash", "")).startswith("sha256="):  # the field before `hashes`
            sha = archive["hash"].split("=", 1)[1]
        return commit, sha
    except (OSError, ValueError, AttributeError):
        return None, None


def interpreter_of(argv: list[str], env: Mapping[str, str]) -> tuple[str | None, str]:
    """The Python the command runs, found without running it: argv[0] itself, or the interpreter
    on its #! line (execve(2)); (None, why) when it is not Python or cannot be found."""
    if not argv:
        return None, "no command"
    exe = shutil.which(argv[0], path=env.get("PATH")) if os.sep not in argv[0] else argv[0]
    if not exe or not os.path.isfile(exe):
        return None, f"{argv[0]} was not found on PATH"
    if re.fullmatch(r"python[0-9.]*", os.path.basename(exe)):
        return os.path.abspath(exe), ""
    try:
        with open(exe, "rb") as f:
            head = f.read(256)
    except OSError as e:
        return None, f"{exe} cannot be read ({e.strerror})"
    if not head.startswith(b"#!"):
        return None, f"{exe} is not a Python script (no #! line)"
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if words and os.path.basename(words[0]) == "env" and len(words) > 1:
        words = [shutil.which(words[1], path=env.get("PATH")) or words[1]]
    if not words or not re.fullmatch(r"python[0-9.]*", os.path.basename(words[0])):
        return None, f"{exe} is not a Python script (#! {' '.join(words)})"
    return os.path.abspath(words[0]), ""


def same_python(interpreter: str) -> bool:
    """The same interpreter in the same environment: the same binary from the same bin directory
    (a virtual environment's python is a link to the system's, with its own site-packages)."""
    ours = os.path.abspath(sys.executable)
    return os.path.realpath(interpreter) == os.path.realpath(ours) and os.path.dirname(interpreter) == os.path.dirname(
        ours
    )


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            h.update(block)
    return h.hexdigest()


def config_hashes(argv: list[str], cwd: str) -> tuple[dict[str, str], dict[str, str]]:
    """({path: sha256}, {path: why not hashed}) of each config file an argument names (itself, or
    after `=` as in --config=a.yaml or Hydra's key=path), and of each Hydra config group file a
    `group=option` argument picks from a `--config-dir` (hydra.group_files), relative to `cwd`."""
    hashes: dict[str, str] = {}
    skipped: dict[str, str] = {}
    named = [c for arg in argv[1:] for c in {arg, arg.split("=", 1)[-1]}]
    for cand in [*named, *hydra.group_files(argv)]:
        if not cand.lower().endswith(CONFIG_SUFFIXES):
            continue
        path = os.path.normpath(os.path.join(cwd, os.path.expanduser(cand)))
        if path in hashes or not os.path.isfile(path):
            continue
        try:
            size = os.path.getsize(path)
            if size > CONFIG_MAX_BYTES:
                skipped[path] = f"{size} B, over {CONFIG_MAX_BYTES} B"
                continue
            hashes[path] = sha256_file(path)
        except OSError as e:
            skipped[path] = f"cannot be read ({e.strerror})"
    return hashes, skipped


def is_dlio(argv: list[str]) -> bool:
    """DLIO's console script (dlio_benchmark), or its module run with -m, anywhere in the argv (an
    mpirun/torchrun launcher goes first)."""
    return any(os.path.basename(a).startswith("dlio_benchmark") for a in argv)


def provenance(argv: list[str], cwd: str, env: Mapping[str, str] | None = None) -> dict:
    """meta.json's `provenance` for the command `argv` run in `cwd` with `env` (os.environ)."""
    env = os.environ if env is None else env
    out: dict = {"see": dict(SEE)}
    interpreter, why = interpreter_of(argv, env)
    launched = 0
    if interpreter is None:  # a launcher (mpirun -np 8 dlio_benchmark ..., srun python ...): what it runs
        for i, arg in enumerate(argv[1:LAUNCHER_ARGS], 1):
            found = interpreter_of([arg], env)[0] if arg and not arg.startswith("-") else None
            if found is not None:
                interpreter, launched, why = found, i, ""
                break
    if interpreter is not None and not same_python(interpreter):
        why = f"the command runs {interpreter}, not the recorder's Python ({sys.executable})"
        interpreter = None
    libs = installed() if interpreter is not None else {}
    out["libraries"] = {n: v for n, (v, _) in sorted(libs.items())} if interpreter is not None else None
    out["libraries_source"] = (
        f"importlib metadata on {sys.executable}'s sys.path" + (f" (argv[{launched}], launched)" if launched else "")
        if interpreter
        else None
    )
    out["libraries_unknown"] = None if interpreter else why
    if is_dlio(argv):
        dlio = libs.get("dlio_benchmark")
        commit, archive_sha256 = install_source(dlio[1]) if dlio else (None, None)
        out["dlio"] = {
            "version": dlio[0] if dlio else None,
            "commit": commit,
            "archive_sha256": archive_sha256,
            "unknown": None if dlio else (why or "dlio_benchmark is not installed in this Python"),
        }
    out["command_sha256"] = hashlib.sha256("\0".join(argv).encode("utf-8", "surrogateescape")).hexdigest()
    out["config_sha256"], out["config_not_hashed"] = config_hashes(argv, cwd)
    return out
