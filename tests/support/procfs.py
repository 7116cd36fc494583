"""/proc and /sys as tests fake them: /proc/diskstats lines in every kernel layout
(Documentation/admin-guide/iostats.rst), a /sys/class/block tree, and a real process tree that
writes known byte counts (TREE, a script for `python -c`)."""

# One line per layout the kernel has printed (Documentation/admin-guide/iostats.rst).
LINE_17 = "   8       0 sda 101 2 303 4 505 6 707 8 1 10 11 12 13 14 15 16 17"


LINE_15 = "   8       0 sda 101 2 303 4 505 6 707 8 1 10 11 12 13 14 15"


LINE_11 = "   8       0 sda 101 2 303 4 505 6 707 8 1 10 11"


LINE_4 = "   8       1 sda1 101 303 505 707"  # 2.6.0–2.6.24 partitions


LINE_24 = "   8     0   1048576 sda 101 2 303 4 505 6 707 8 1 10 11"  # 2.4 /proc/partitions


LINE_20 = LINE_17 + " 18 19 20"  # a future kernel appending fields


# root (python) → child (writes 4 MiB) → grandchild (writes 8 MiB); child also double-forks an orphan
# that writes 2 MiB in the tree, then 1 MiB after its parent is gone (re-parented out of the tree:
# not the command's any more; its last-seen 2 MiB stay counted). Everyone lives ≥ 0.3 s so
# both collectors see everyone; the root outlives them all, then sleeps quietly.
TREE = r"""
import os, sys, time
def write(n):
    fd = os.open(os.devnull, os.O_WRONLY)
    for _ in range(n):
        os.write(fd, b"x" * (1 << 20))
    os.close(fd)
def child():
    g = os.fork()
    if g == 0:
        time.sleep(0.3); write(8); time.sleep(0.3); os._exit(0)
    o = os.fork()
    if o == 0:  # the orphan: writes 2 MiB in the tree, is re-parented out of it, writes 1 MiB more
        if os.fork() == 0:
            time.sleep(0.3); write(2); time.sleep(0.8); write(1); time.sleep(0.2); os._exit(0)
        time.sleep(0.6); os._exit(0)
    os.waitpid(o, 0)
    time.sleep(0.2); write(4); os.waitpid(g, 0); time.sleep(0.3)
    os._exit(0)
c = os.fork()
if c == 0:
    child()
os.waitpid(c, 0)
time.sleep(1.5)
"""


def fake_block_tree(root, dev="sda", iostats=1):
    (root / "proc").mkdir(parents=True, exist_ok=True)
    q = root / "sys" / "class" / "block" / dev / "queue"
    q.mkdir(parents=True, exist_ok=True)
    for attr, v in {
        "nr_requests": "64",
        "rotational": "0",
        "logical_block_size": "512",
        "scheduler": "mq-deadline [none]",
        "iostats": str(iostats),
    }.items():
        (q / attr).write_text(v + "\n")
    return root
