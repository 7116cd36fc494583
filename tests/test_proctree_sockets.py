"""The proc connector's forks and execs on two sockets (record/proctree_events.py, Linux 6.6's
per-socket filter): the socket the file-activity reader waits on in its merge pauses carries only
execs and comms, so the machine's other forks no longer wake it; membership and the names of
short-lived writers are what they were. Real processes, the real connector (root).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ckprof.record import proctree_events as P

pytestmark = pytest.mark.root


@pytest.fixture
def tree():
    if os.geteuid() != 0:
        pytest.skip("the proc connector needs root (CAP_NET_ADMIN)")
    if not P._filters_per_socket():
        pytest.skip(f"Linux {os.uname().release} sends every event to every listener (filters: 6.6)")
    t = P.ProcTree()
    if t.sock is None:
        pytest.skip(t.basis)
    yield t
    t.close()


def _kinds(sock) -> set[int]:
    out = set()
    while True:
        try:
            buf = sock.recv(1 << 16)
        except BlockingIOError:
            return out
        out.add(P._EVENT.unpack_from(buf, P._NLMSG.size + P._CN_MSG.size)[0])


def test_the_socket_waited_on_carries_no_forks(tree):
    # a process outside the tree forks 50 children that exit at once, then one exec
    code = "import os\nfor _ in range(50):\n    pid = os.fork()\n    if pid == 0: os._exit(0)\n    os.waitpid(pid, 0)\n"
    subprocess.run([sys.executable, "-c", code], check=True)
    time.sleep(0.1)
    waited = next(s for s in (tree.sock, tree.exec_sock) if s is not None and s.fileno() == tree.fileno())
    kinds = _kinds(waited)
    assert P.PROC_EVENT_EXEC in kinds  # the exec of python itself (and whatever else ran meanwhile)
    assert P.PROC_EVENT_FORK not in kinds, kinds
    assert _kinds(tree.sock) == {P.PROC_EVENT_FORK}


WRITER = r"""
import os, sys, time
sys.stdin.readline()
pid = os.fork()
if pid == 0:
    os.execvp("sh", ["sh", "-c", "sleep 0.5"])
os.waitpid(pid, 0)
"""


def test_membership_and_a_childs_exec_are_still_seen(tree):
    p = subprocess.Popen([sys.executable, "-c", WRITER], stdin=subprocess.PIPE, text=True)
    tree.set_root(p.pid)
    p.stdin.write("go\n")
    p.stdin.close()
    deadline = time.monotonic() + 10
    kids = set()
    while time.monotonic() < deadline and not (kids and any(tree.execs.get(k) for k in kids)):
        time.sleep(0.05)
        tree.drain()
        kids = {c for c, parent in tree.parents.items() if parent == p.pid}
    p.wait(timeout=10)
    assert len(kids) == 1
    (kid,) = kids
    assert tree.contains(kid)
    assert tree.execs[kid]["comm"] in ("sh", "sleep"), tree.execs[kid]
