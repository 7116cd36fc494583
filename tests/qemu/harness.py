"""ckprof's QEMU NVMe harness: a throw-away guest with QEMU's emulated NVMe controller.

The machines ckprof is tested on have no NVMe drive. QEMU's `-device nvme` is a real NVMe
controller to the guest's kernel driver: nvme-cli, SMART counters that move with writes,
the kernel's hwmon sensor, and thermal warnings that can be raised (set-feature 4 below the
current temperature, or QMP qom-set smart_critical_warning from the host).

The guest boots the host's own Debian kernel with a small busybox + nvme-cli initramfs built
here on first use (cached), shares the host's / read-only over virtio-9p and chroots into it,
so the host's Python, its virtual environment and ckprof run unchanged inside the guest against
the emulated controller, wherever the checkout and its virtual environment are: no host
directory is hidden (only the kernel's /proc, /sys and /dev are mounted over). One host
directory (`out`) is shared read-write at the same path, for the recording; the guest's own
scratch is a tmpfs at `out`/.guest, where $TMPDIR points (the host's /tmp is read-only in the
guest). Learnt from the team lab's run.sh (shared/lab/qemu-nvme, outside this repository),
written for ckprof.

    g = QemuNvmeGuest()
    if g.why_not(): pytest.skip(g.why_not())
    res = g.run("nvme list; ckprof record --device nvme0n1 -- ...", out_dir)

Apt packages: qemu-system-x86 nvme-cli linux-image-amd64 busybox-static cpio kmod.
"""

from __future__ import annotations

import compileall
import glob
import hashlib
import lzma
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass

# Module groups loaded by /init, each in load order with its dependencies (modprobe --show-depends).
# crc64_rocksoft_generic is a soft dependency of nvme-core that modprobe does not list.
# ext4 (with crc32c, its soft dependency) lets a test put a file system on the namespace.
MODULE_GROUPS = {
    "base": ("crc64_rocksoft_generic", "nvme"),
    "hostfs": ("virtio_pci", "9pnet_virtio", "9p"),
    "fs": ("crc32c_generic", "ext4"),
}

INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs dev /dev
echo 1 > /proc/sys/kernel/printk
ld() { for m in /mods/$1/*.ko; do insmod "$m" 2>/dev/null || echo "insmod $(basename $m) failed"; done; }
ld base; ld hostfs; ld fs
i=0; while [ ! -e /dev/nvme0n1 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
o=$(sed 's/.*ckout=\([^ ]*\).*/\1/' /proc/cmdline)
mkdir -p /host
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose hostroot /host
mount -t proc proc /host/proc; mount -t sysfs sys /host/sys; mount -t devtmpfs dev /host/dev
mount -t 9p -o trans=virtio,version=9p2000.L hostout /host$o
mount -t tmpfs guest /host$o/.guest; mkdir /host$o/.guest/tmp
cp /guest.sh /host$o/.guest/guest.sh
echo "@@@GUEST-UP $(cut -d' ' -f1 /proc/uptime)@@@"
chroot /host /bin/sh -c "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root OUT=$o TMPDIR=$o/.guest/tmp; cd $o; . $o/.guest/guest.sh" > /dev/ttyS1 2>&1
rc=$?
echo "$rc" > /host$o/guest.rc
sync
echo "@@@GUEST-DONE rc=$rc@@@"
poweroff -f
"""


@dataclass
class GuestResult:
    rc: int | None  # the guest script's exit status; None if it never finished
    wall_s: float
    console: str  # kernel and /init (ttyS0)
    output: str  # the guest script's stdout and stderr (ttyS1)

    def describe(self) -> str:
        return (
            f"guest rc={self.rc} after {self.wall_s:.1f} s\n--- guest output (tail) ---\n"
            f"{self.output[-4000:]}\n--- console (tail) ---\n{self.console[-2000:]}"
        )


def _kernel_version() -> str | None:
    kvers = sorted(
        (os.path.basename(p) for p in glob.glob("/lib/modules/*-amd64")),
        key=lambda v: [int(x) if x.isdigit() else x for x in v.replace("-", ".").split(".")],
    )
    for kv in reversed(kvers):
        if os.path.exists(f"/boot/vmlinuz-{kv}"):
            return kv
    return None


class QemuNvmeGuest:
    def __init__(self, cache_dir: str | None = None, qemu: str = "qemu-system-x86_64"):
        self.cache_dir = cache_dir or os.path.join(
            os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "ckprof-qemu-nvme"
        )
        self.qemu = qemu
        self.kver = _kernel_version()

    def why_not(self) -> str | None:
        """Why this machine cannot boot the guest (a skip reason), or None when it can."""
        for tool, pkg in ((self.qemu, "qemu-system-x86"), ("nvme", "nvme-cli"), ("cpio", "cpio"), ("modprobe", "kmod")):
            if shutil.which(tool) is None:
                return f"{tool} not installed (apt-get install {pkg})"
        if not os.path.exists("/bin/busybox"):
            return "/bin/busybox not installed (apt-get install busybox-static)"
        if self.kver is None:
            return "no /boot/vmlinuz-*-amd64 with its /lib/modules (apt-get install linux-image-amd64)"
        if os.geteuid() != 0:
            return "the 9p share of / and the guest's view of it need root"
        return None

    @property
    def kernel(self) -> str:
        return f"/boot/vmlinuz-{self.kver}"

    @property
    def initramfs(self) -> str:
        # the name changes with what goes in (modules, /init), so a cached older build is not reused
        tag = hashlib.sha256(repr((MODULE_GROUPS, INIT)).encode()).hexdigest()[:12]
        return os.path.join(self.cache_dir, f"initramfs-{self.kver}-{tag}.cpio")

    def _module_files(self, names) -> list[str]:
        # One name per modprobe call: later arguments would be taken as module parameters.
        out = "".join(
            subprocess.run(
                ["modprobe", "-S", self.kver, "--show-depends", n], check=True, capture_output=True, text=True
            ).stdout
            for n in names
        )
        seen: list[str] = []
        for line in out.splitlines():
            parts = line.split()
            if parts and parts[0] == "insmod" and parts[1] not in seen:
                seen.append(parts[1])
        return seen

    def build_initramfs(self, force: bool = False) -> str:
        """busybox + nvme-cli (with its shared libraries) + the NVMe and 9p modules + /init."""
        if os.path.exists(self.initramfs) and not force:
            return self.initramfs
        os.makedirs(self.cache_dir, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.cache_dir) as root:
            for d in ("bin", "sbin", "proc", "sys", "dev", "tmp", "etc", "mods", "host"):
                os.makedirs(os.path.join(root, d))
            shutil.copy2("/bin/busybox", os.path.join(root, "bin", "busybox"))
            nvme = shutil.which("nvme")
            shutil.copy2(nvme, os.path.join(root, "bin", "nvme"))
            ldd = subprocess.run(["ldd", nvme], capture_output=True, text=True, check=True).stdout
            for line in ldd.splitlines():
                parts = line.split()
                lib = (
                    parts[2]
                    if "=>" in parts and len(parts) > 2
                    else (parts[0] if parts and parts[0].startswith("/") else None)
                )
                if lib and os.path.exists(lib):
                    dest = root + lib
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                    shutil.copy2(lib, dest, follow_symlinks=True)
            for group, names in MODULE_GROUPS.items():
                gdir = os.path.join(root, "mods", group)
                os.makedirs(gdir)
                for i, m in enumerate(self._module_files(names), 1):
                    base = os.path.basename(m)
                    dest = os.path.join(gdir, f"{i:02d}_{base.removesuffix('.xz').removesuffix('.zst')}")
                    if m.endswith(".xz"):
                        with lzma.open(m) as src, open(dest, "wb") as dst:
                            shutil.copyfileobj(src, dst)
                    elif m.endswith(".zst"):
                        with open(dest, "wb") as dst:
                            subprocess.run(["zstd", "-qdc", m], stdout=dst, check=True)
                    else:
                        shutil.copy2(m, dest)
            with open(os.path.join(root, "init"), "w") as f:
                f.write(INIT)
            os.chmod(os.path.join(root, "init"), 0o755)
            tmp = self.initramfs + ".tmp"
            with open(tmp, "wb") as out:
                files = subprocess.run(["find", "."], cwd=root, capture_output=True, check=True).stdout
                subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=files, stdout=out, check=True)
            os.replace(tmp, self.initramfs)
        return self.initramfs

    def run(
        self,
        script: str,
        out_dir: str,
        nvme_size: str = "64M",
        nvme_opts: str = "",
        qemu_extra: tuple[str, ...] = (),
        timeout_s: float = 240,
    ) -> GuestResult:
        """Boot, run `script` (sh, chrooted into the host's /, cwd and $OUT = out_dir; $TMPDIR
        a scratch tmpfs of the guest's own), power off."""
        base = self.build_initramfs()
        compile_package()
        out_dir = os.path.abspath(out_dir)
        if any(c.isspace() for c in out_dir):
            raise ValueError(f"out_dir {out_dir!r}: the kernel command line that carries it cannot hold spaces")
        os.makedirs(os.path.join(out_dir, ".guest"), exist_ok=True)  # the guest mounts its scratch here
        work = tempfile.mkdtemp(prefix="ckprof-qemu-")
        try:
            gdir = os.path.join(work, "g")
            os.makedirs(gdir)
            with open(os.path.join(gdir, "guest.sh"), "w") as f:
                f.write(script + "\n")
            # The kernel unpacks concatenated cpio archives in order: base initramfs + guest.sh.
            initrd = os.path.join(work, "initrd.cpio")
            with open(initrd, "wb") as out:
                with open(base, "rb") as b:
                    shutil.copyfileobj(b, out)
                subprocess.run(
                    ["cpio", "-o", "-H", "newc", "--quiet"], cwd=gdir, input=b"guest.sh\n", stdout=out, check=True
                )
            img = os.path.join(work, "nvm.img")
            with open(img, "wb") as f:
                f.truncate(_size_bytes(nvme_size))
            console, output = os.path.join(work, "console.log"), os.path.join(work, "out.log")
            rc_file = os.path.join(out_dir, "guest.rc")
            if os.path.exists(rc_file):
                os.unlink(rc_file)
            # TCG, not KVM: on these (nested) machines -accel kvm hangs before the first console line.
            accel = os.environ.get("CKPROF_QEMU_ACCEL", "tcg,thread=multi")
            argv = [
                self.qemu,
                "-accel",
                accel,
                "-cpu",
                "max",
                "-smp",
                "2",
                "-m",
                "1024",
                "-display",
                "none",
                "-no-reboot",
                "-nodefaults",
                "-serial",
                f"file:{console}",
                "-serial",
                f"file:{output}",
                "-kernel",
                self.kernel,
                "-initrd",
                initrd,
                "-append",
                f"console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init nvme_core.multipath=N ckout={out_dir}",
                "-drive",
                f"file={img},if=none,id=nvm,format=raw",
                "-device",
                f"nvme,id=nvme0,serial=deadbeef,drive=nvm{nvme_opts}",
                "-virtfs",
                "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
                "-virtfs",
                f"local,path={out_dir},mount_tag=hostout,security_model=none",
                *qemu_extra,
            ]
            t0 = time.monotonic()
            try:
                subprocess.run(
                    argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout_s
                )
            except subprocess.TimeoutExpired:
                pass  # subprocess.run killed QEMU; rc stays None below
            wall = time.monotonic() - t0
            rc = None
            if os.path.exists(rc_file):
                with open(rc_file) as f:
                    text = f.read().strip()
                rc = int(text) if text.lstrip("-").isdigit() else None
            return GuestResult(rc, wall, _read(console), _read(output))
        finally:
            shutil.rmtree(work, ignore_errors=True)


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def compile_package() -> None:
    """Write the bytecode of ckprof's own modules (profiler/, collectors/, workloads/) on the host
    before the guest starts. The guest sees the host's / read-only, so with no __pycache__ there
    (PYTHONDONTWRITEBYTECODE, a fresh clone) every ckprof command in the guest compiled its ~80
    modules again under TCG: tens of seconds a command, which took the NVMe tier's guest past its
    limit in CI. Site-packages have theirs from pip."""
    for d in ("profiler", "collectors", "workloads"):
        compileall.compile_dir(os.path.join(REPO, d), quiet=1)


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read().replace("\r", "")
    except OSError:
        return ""


def _size_bytes(text: str) -> int:
    mult = {"K": 1024, "M": 1024**2, "G": 1024**3}
    return int(text[:-1]) * mult[text[-1]] if text[-1] in mult else int(text)
