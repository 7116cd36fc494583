"""How far this host's clock may be from true time: the kernel's NTP state, and chrony's view.

adjtimex(2) with modes = 0 only reads the kernel's timekeeping state, which NTP daemons
(chronyd, ntpd, systemd-timesyncd) keep up to date: STA_UNSYNC in `status` says the clock is not
synchronised, `maxerror`/`esterror` bound its error in µs (include/uapi/linux/timex.h). Where
chronyc is installed, `chronyc -c tracking` adds the measured offset to its source.
Recorded in meta.json so a job's hosts can be lined up, and their misalignment bounded.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import shutil
import subprocess

STA_UNSYNC = 0x0040
TIME_ERROR = 5


class _Timeval(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long)]


class _Timex(ctypes.Structure):
    # struct timex from <sys/timex.h> (glibc); trailing padding as the kernel's struct has it
    _fields_ = [
        ("modes", ctypes.c_uint),
        ("offset", ctypes.c_long),
        ("freq", ctypes.c_long),
        ("maxerror", ctypes.c_long),
        ("esterror", ctypes.c_long),
        ("status", ctypes.c_int),
        ("constant", ctypes.c_long),
        ("precision", ctypes.c_long),
        ("tolerance", ctypes.c_long),
        ("time", _Timeval),
        ("tick", ctypes.c_long),
        ("ppsfreq", ctypes.c_long),
        ("jitter", ctypes.c_long),
        ("shift", ctypes.c_int),
        ("stabil", ctypes.c_long),
        ("jitcnt", ctypes.c_long),
        ("calcnt", ctypes.c_long),
        ("errcnt", ctypes.c_long),
        ("stbcnt", ctypes.c_long),
        ("tai", ctypes.c_int),
        ("_pad", ctypes.c_int * 11),
    ]


def kernel_ntp_state() -> dict:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        tx = _Timex()
        state = libc.adjtimex(ctypes.byref(tx))
    except (OSError, AttributeError) as e:
        return {"source": "adjtimex", "error": str(e)}
    if state < 0:
        return {"source": "adjtimex", "error": f"errno {ctypes.get_errno()}"}
    synced = not (tx.status & STA_UNSYNC) and state != TIME_ERROR
    return {"source": "adjtimex", "synchronised": synced, "maxerror_us": tx.maxerror, "esterror_us": tx.esterror}


def chrony_tracking(timeout_s: float = 2.0) -> dict | None:
    """`chronyc -c tracking`: CSV; field 5 is the system time's offset from NTP time in s."""
    if not shutil.which("chronyc"):
        return None
    try:
        out = (
            subprocess.run(["chronyc", "-c", "tracking"], capture_output=True, text=True, timeout=timeout_s, check=True)
            .stdout.strip()
            .split(",")
        )
        return {
            "source": "chronyc",
            "reference": out[1],
            "offset_s": float(out[4]),
            "root_dispersion_s": float(out[10]) if len(out) > 10 else None,
        }
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        return {"source": "chronyc", "error": str(e)}


def clock_sync() -> dict:
    out = {"kernel": kernel_ntp_state()}
    chrony = chrony_tracking()
    if chrony:
        out["chrony"] = chrony
    return out
