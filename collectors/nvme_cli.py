"""Running nvme-cli: one subprocess per call, bounded by a timeout, failures turned into ckprof's errors.

A hung nvme-cli (a controller that stopped answering admin commands, a driver in recovery) must
cost at most `timeout_s` of the NVMe collector's own thread and nothing else. The command runs in
its own session, so on timeout the whole process group is killed: killing only the direct child
would leave a grandchild holding the output pipe open and `communicate()` waiting on it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

from ckprof.errors import CollectorUnavailable

INSTALL_HINT = "install nvme-cli (Debian/Ubuntu: apt-get install nvme-cli)"
PERMISSION_HINT = (
    "nvme-cli admin commands need root (CAP_SYS_ADMIN) or read-write access to "
    "/dev/nvmeX; run ckprof as root, or record temperature only via hwmon"
)


class NvmeCliError(CollectorUnavailable):
    """nvme-cli could not give an answer. `kind`: missing | permission | timeout | failed | unparseable."""

    def __init__(self, kind: str, message: str, hint: str | None = None):
        super().__init__(message, hint)
        self.kind = kind


class NvmeCli:
    def __init__(self, binary: str = "nvme", timeout_s: float = 3.0):
        self.binary = binary
        self.timeout_s = timeout_s

    def path(self) -> str | None:
        return shutil.which(self.binary)

    def run(self, *args: str, binary: bool = False):
        """`nvme ARGS...` → its stdout (str, or bytes with binary=True); NvmeCliError otherwise."""
        argv = [self.binary, *args]
        what = " ".join(argv)
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
            )
        except FileNotFoundError:
            raise NvmeCliError("missing", f"{self.binary}: command not found", INSTALL_HINT) from None
        except PermissionError:
            raise NvmeCliError("permission", f"{self.binary}: not executable", INSTALL_HINT) from None
        try:
            out, err = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                proc.communicate(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass  # stuck in the kernel (D state): leave it; it is no longer our thread's problem
            raise NvmeCliError(
                "timeout",
                f"`{what}` did not answer within {self.timeout_s:g} s",
                "the controller or nvme-cli hangs; see dmesg",
            ) from None
        err_text = err.decode(errors="replace").strip()
        if proc.returncode != 0:
            low = err_text.lower() + out.decode(errors="replace").lower()
            first = (err_text.splitlines() or [f"exit status {proc.returncode}"])[0][:160]
            if "permission denied" in low or "operation not permitted" in low:
                raise NvmeCliError("permission", f"`{what}`: {first}", PERMISSION_HINT)
            raise NvmeCliError("failed", f"`{what}` failed (exit {proc.returncode}): {first}")
        return out if binary else out.decode(errors="replace")
