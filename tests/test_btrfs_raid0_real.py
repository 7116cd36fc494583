"""btrfs raid0 over two loop devices (issue 21 item 6): the native-threads writer of
tests/test_native_threads_real.py (4 pthreads, 32 MiB a save, fsync, no marker) under
`ckprof record --path` on a btrfs whose data is striped over both loops (metadata raid1).

Beside that test's checks (one checkpoint per save, ≥ 95 % covered, bytes = the file, its writer,
durable), the devices: each checkpoint's device figures name both member devices, with an even
split of the striped data (each loop 35-65 % of the two's writes in the window), and the
checkpoints' device bytes, counted once, at most 1.05 × what the two loops wrote over the run.
"""

from __future__ import annotations

import pytest
from support.native import check_native, record_native
from support.system import mount_btrfs_raid0

pytestmark = pytest.mark.root
MiB = 2**20


def test_native_saves_on_btrfs_raid0_over_two_loops(make_loop, tmp_path):
    a, b = make_loop("512M"), make_loop("512M")
    mnt = mount_btrfs_raid0(a, b, tmp_path / "btr")
    rec, rep, saves = record_native(tmp_path, mnt)
    failed = check_native(rec, rep, saves)
    members = {a.name, b.name}
    blk = rec.block()
    written = {d: float(blk.loc[blk["device"] == d, "write_bytes"].sum()) for d in members}
    rows = [c for c in rep["checkpoints"] if c["kind"] == "save"]
    for c in rows:
        devs = {d: (v.get("write_bytes") or 0.0) for d, v in (c.get("devices") or {}).items() if d in members}
        total = sum(devs.values())
        shares = {d: round(n / total, 3) if total else None for d, n in devs.items()}
        print(f"  {c['id']}: bytes_device {c['bytes_device']}, per member {devs} (shares {shares})")
        if set(devs) != members or not total:
            failed.append(
                f"{c['id']}: member devices {sorted(devs)} with {total} B, expected both of {sorted(members)}"
            )
        elif any(not 0.35 <= s <= 0.65 for s in shares.values()):
            failed.append(f"{c['id']}: uneven split over the raid0 members {shares}")
    cp_dev = sum(c["bytes_device"] or 0 for c in rows)
    dev_total = sum(written.values())
    print(f"  Σ bytes_device {cp_dev / MiB:.2f} MiB / the loops wrote {dev_total / MiB:.2f} MiB ({written})")
    if not dev_total or cp_dev > 1.05 * dev_total:
        failed.append(f"Σ bytes_device {cp_dev} > 1.05 × {dev_total} the members wrote")
    assert not failed, failed
