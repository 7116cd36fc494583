"""The workload's pieces on their own: launcher detection, data, checksums, publishing, keeping."""

import os

import numpy as np
import pytest

from ckprof.errors import CkprofError
from ckprof.workloads import store
from ckprof.workloads.comm import launcher_env, launcher_world
from ckprof.workloads.data import RING_MIN_BYTES, Pool, aligned_buffer, chunk_key
from ckprof.workloads.shardio import ChecksumMismatch, FileJob, read_files, write_files


@pytest.mark.parametrize(
    "env,which,world",
    [
        ({}, None, None),
        ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}, "torchrun", 2),
        ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4"}, "mpirun", 4),
        ({"PMI_RANK": "3", "PMI_SIZE": "8"}, "mpi", 8),
        ({"SLURM_PROCID": "0", "SLURM_NTASKS": "16"}, "srun", 16),
        ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, None, 1),  # a one-task allocation: run locally
    ],
)
def test_launcher_detection(env, which, world):
    assert launcher_env(env) == which
    assert launcher_world(env) == world


def test_pool_chunks_differ_and_are_deterministic():
    pool = Pool(64 * 1024, seed=7)
    out = [np.frombuffer(aligned_buffer(64 * 1024), dtype=np.uint64) for _ in range(3)]
    pool.fill(out[0], chunk_key(1, 0, 1, 0, 0), 64 * 1024)
    pool.fill(out[1], chunk_key(1, 0, 1, 0, 1), 64 * 1024)
    pool.fill(out[2], chunk_key(1, 0, 1, 0, 0), 64 * 1024)
    assert (out[0] == out[2]).all()
    assert (out[0] != out[1]).mean() > 0.99
    again = Pool(64 * 1024, seed=7)
    assert (again.words[:1000] == pool.words[:1000]).all()


def test_streamed_file_longer_than_the_ring_has_no_equal_blocks_and_does_not_compress(tmp_path):
    """write_files stamps ring buffers: a file past one ring (its bytes recur there, stamps aside)
    still has no two equal 4 KiB blocks, and no 1 MiB of it compresses."""
    import zlib

    chunk = 256 * 1024
    n = RING_MIN_BYTES + 8 * chunk + 4096 + 100  # past the ring, with a partial last block
    jobs = [FileJob(str(tmp_path / f"f{i}"), f"f{i}", n, i) for i in range(2)]
    write_files(jobs, Pool(chunk, 3), seed=5, rank=0, step=1, chunk_bytes=chunk)
    blocks, total = set(), 0
    for j in jobs:
        data = open(j.path, "rb").read()
        assert len(data) == n
        for off in (0, RING_MIN_BYTES - 2**19):
            assert len(zlib.compress(data[off : off + 2**20], 6)) > 0.99 * 2**20
        for i in range(0, n - n % 4096, 4096):
            blocks.add(data[i : i + 4096])
            total += 1
    assert len(blocks) == total


@pytest.mark.parametrize("threads,direct", [(1, False), (3, False), (2, True)])
def test_write_then_read_round_trip(tmp_path, threads, direct):
    sizes = [0, 4096, 3 * 65536 + 4096, 65536 * 5 + 100]  # empty, one block, several chunks, a tail
    jobs = [FileJob(str(tmp_path / f"f{i}"), f"f{i}", n, i) for i, n in enumerate(sizes)]
    seen = []
    res = write_files(
        jobs,
        Pool(65536, 1),
        seed=1,
        rank=0,
        step=1,
        chunk_bytes=65536,
        threads=threads,
        direct=direct,
        on_bytes=seen.append,
    )
    assert [os.path.getsize(j.path) for j in jobs] == sizes and sum(seen) == sum(sizes)
    for j, r in zip(jobs, res):
        j.digest = r.digest
    back = read_files(jobs, chunk_bytes=65536, threads=threads, direct=direct)
    assert [r.digest for r in back] == [r.digest for r in res]
    with open(jobs[2].path, "r+b") as f:
        f.seek(70000)
        c = f.read(1)
        f.seek(70000)
        f.write(bytes([c[0] ^ 0x80]))
    with pytest.raises(ChecksumMismatch, match="f2: checksum"):
        read_files(jobs, chunk_bytes=65536, threads=threads, direct=direct)
    os.truncate(jobs[3].path, 10)
    with pytest.raises(ChecksumMismatch, match="f3: 10 B on disk, the manifest says"):
        read_files(jobs, chunk_bytes=65536)


def test_publish_prune_and_numbering(tmp_path):
    t = str(tmp_path)
    assert store.next_step(t) == 1
    for step in (1, 2, 3):
        name = store.checkpoint_name(step)
        p = store.partial_dir(t, name, "run")
        os.makedirs(p)
        (tmp_path / os.path.basename(p) / "x").write_bytes(b"1")
        assert store.complete_checkpoints(t) == [(s, os.path.join(t, store.checkpoint_name(s))) for s in range(1, step)]
        store.publish(p, os.path.join(t, name), {"name": name, "files": []})
    assert store.next_step(t) == 4
    # a directory with a checkpoint's name but no manifest is not complete, and not counted
    os.makedirs(os.path.join(t, store.checkpoint_name(9)))
    assert store.next_step(t) == 4
    assert [os.path.basename(p) for p in store.prune(t, 2)] == ["global_epoch1_step1"]
    assert [s for s, _ in store.complete_checkpoints(t)] == [2, 3]
    with pytest.raises(CkprofError, match="no ckprof-manifest.json"):
        store.read_manifest(os.path.join(t, store.checkpoint_name(9)))
    os.makedirs(store.partial_dir(t, "global_epoch1_step4", "run"))
    store.remove_partials(t, "run")
    assert not any(n.startswith(".partial-") for n in os.listdir(t))


def test_the_summary_says_why_a_gpu_rank_is_large():
    from rich.console import Console

    from ckprof.workloads.config import RunConfig
    from ckprof.workloads.options import ModelOptions
    from ckprof.workloads.summary import render

    plan = ModelOptions(preset="llama3-8b", ranks=2, total_bytes=64 * 2**20).plan()
    rank = {"rank": 0, "seconds": 0.1, "bytes": 1, "gib_per_s": 1.0, "max_rss_bytes": 700 * 2**20}
    ck = {"name": "step-1", "step": 1, "seconds": 0.1, "bytes": 1, "gib_per_s": 1.0, "blocked_s": 0.1, "ranks": [rank]}
    results = {"checkpoints": [ck, ck]}
    for compute, said in (("gpu", True), ("sleep", False)):
        console = Console(record=True, width=300)
        render(results, plan, RunConfig(target="/x", count=2, interval_s=1.0, compute=compute), None, console)
        text = console.export_text()
        assert "peak RSS per rank (measured, VmHWM): max 700.00 MiB" in text
        assert ("CUDA context" in text) is said
