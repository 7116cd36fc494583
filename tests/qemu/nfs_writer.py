"""Run inside the QEMU guest under `ckprof record`: three 8 MiB saves to an NFS mount, each
fsync'd and marked with ckprof.checkpoint(), after the host-side script says go (so nfsiostat is
already running); a second apart, so no sampling interval touches two saves."""

import os
import sys
import time

import ckprof

SAVES, SAVE_BYTES = 3, 8 * 2**20


def main(mnt: str, go: str, ready: str) -> None:
    open(ready, "w").close()
    while not os.path.exists(go):
        time.sleep(0.05)
    block = b"\x5a" * 2**20
    for i in range(SAVES):
        path = os.path.join(mnt, f"ckpt-{i}.bin")
        with ckprof.checkpoint(step=i, path=path, bytes=SAVE_BYTES):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            for _ in range(SAVE_BYTES // len(block)):
                os.write(fd, block)
            os.fsync(fd)
            os.close(fd)
        time.sleep(1.0)


if __name__ == "__main__":
    main(*sys.argv[1:4])
