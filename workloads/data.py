"""Checkpoint bytes that neither compress nor deduplicate, made without a shard's worth of RAM.

Before the timed region each rank fills a pool (8 MiB or two chunks, whichever is larger) with
random bytes. `Pool.fill` makes a chunk as a window of the pool XORed with a 64-bit key that is
unique to (run, rank, checkpoint, file, chunk), the window's start moving with the key: every
byte is new, so a compressor finds no match at any distance. That is one pass over memory per
byte written, which on a host with few cores competes with the write(2) copy itself (measured:
it and the checksum cost 60-85 % of the kernel's copy time on a 2-core VM), so streaming writes
use a `Ring` instead:
- a ring of chunk buffers at least RING_MIN_BYTES in all, each filled once per checkpoint with
  `fill` under its own key (random bytes, different for every buffer, rank and checkpoint);
- each chunk written takes the next buffer and stamps the first 8 bytes of every 4 KiB block
  with its chunk's key + the block's index (`Ring.stamp`, 1/512 of the bytes).
Deduplication: two 4 KiB blocks are equal only with the same stamp, i.e. the same block of the
same chunk of the same file of the same checkpoint. Compression: bytes are random within any
stretch shorter than the ring (16 MiB); a buffer's bytes recur, stamps aside, one ring later, so
only a compressor whose window spans more than 16 MiB (zstd --long, 16 MiB ZFS records) could
find those repeats; block- and record-level compression (≤ 1 MiB records, 4 KiB blocks) cannot.
--async staging uses `fill` (it copies the bytes into memory anyway, before the timed writes).

Buffers come from anonymous mmap: page-aligned, as O_DIRECT needs (open(2), "O_DIRECT").
"""

from __future__ import annotations

import mmap

import numpy as np
import xxhash

POOL_MIN_BYTES = 8 * 2**20
RING_MIN_BYTES = 16 * 2**20
BLOCK = 4096
PAGE = mmap.PAGESIZE


def aligned_buffer(nbytes: int) -> mmap.mmap:
    """A page-aligned, zero-filled anonymous mapping of at least `nbytes` (a multiple of 4 KiB)."""
    size = max(PAGE, -(-nbytes // PAGE) * PAGE)
    return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


def chunk_key(run_seed: int, rank: int, step: int, file_index: int, chunk_index: int) -> int:
    return xxhash.xxh3_64_intdigest(f"{run_seed}:{rank}:{step}:{file_index}:{chunk_index}".encode())


class Pool:
    """Random bytes made once per rank; `fill` turns a window of it into one chunk."""

    def __init__(self, chunk_bytes: int, seed: int):
        words = max(POOL_MIN_BYTES, 2 * chunk_bytes) // 8
        self._mem = aligned_buffer(words * 8)
        self.words = np.frombuffer(self._mem, dtype=np.uint64, count=words)
        rng = np.random.default_rng(seed)
        step = 2**20 // 8  # fill in 1 MiB pieces: no second pool-sized temporary
        for i in range(0, words, step):
            n = min(step, words - i)
            self.words[i : i + n] = rng.integers(0, 2**64, size=n, dtype=np.uint64, endpoint=False)
        self.chunk_words = -(-chunk_bytes // 8)

    @property
    def nbytes(self) -> int:
        return self.words.nbytes

    def fill(self, out: np.ndarray, key: int, nbytes: int) -> None:
        """Write `nbytes` (rounded up to 8) of chunk `key` into `out` (a uint64 view of a buffer)."""
        n = -(-nbytes // 8)
        span = len(self.words) - n
        start = key % (span + 1)
        np.bitwise_xor(self.words[start : start + n], np.uint64(key), out=out[:n])


class Ring:
    """Chunk buffers for streaming writes: primed from the pool once, then stamped per chunk."""

    def __init__(self, chunk_bytes: int, min_buffers: int):
        self.n = max(min_buffers, -(-RING_MIN_BYTES // chunk_bytes))
        self.bufs = [aligned_buffer(chunk_bytes) for _ in range(self.n)]
        self.views = [np.frombuffer(b, dtype=np.uint64) for b in self.bufs]
        self._index = np.arange(-(-chunk_bytes // BLOCK), dtype=np.uint64)

    def prime(self, pool: Pool, key) -> None:
        """Fill buffer i with `pool.fill` under key(i): done once per checkpoint."""
        for i, v in enumerate(self.views):
            pool.fill(v, key(i), len(self.bufs[i]))

    def stamp(self, i: int, key: int, nbytes: int) -> None:
        """Make buffer i chunk `key`: the first 8 bytes of each 4 KiB block of its first `nbytes`
        become key + the block's index (mod 2**64)."""
        nblocks = -(-nbytes // BLOCK)
        np.add(self._index[:nblocks], np.uint64(key), out=self.views[i][: nblocks * (BLOCK // 8) : BLOCK // 8])


def file_digest(chunk_digests: list[int]) -> str:
    """A file's checksum: xxh3-64 over its chunks' xxh3-64 digests (8 bytes big-endian each), in
    order. Chunks can then be hashed by several threads; a reader with the same chunk size gets
    the same value. Hex, 16 digits."""
    h = xxhash.xxh3_64()
    for d in chunk_digests:
        h.update(d.to_bytes(8, "big"))
    return h.hexdigest()


def chunk_digest(buf) -> int:
    return xxhash.xxh3_64_intdigest(buf)
