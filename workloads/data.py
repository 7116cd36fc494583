"""Checkpoint bytes that neither compress nor deduplicate, made without a shard's worth of RAM.

Before the timed region each rank fills a pool (16 MiB or two chunks, whichever is larger) with
random bytes. Each chunk written is a window of the pool XORed with a 64-bit key that is unique
to (run, rank, checkpoint, file, chunk), and the window's start moves with the key too:
- compression: every byte is random; a repeat of the pool appears XORed with another key, so a
  compressor finds no match at any distance;
- deduplication: two 4 KiB blocks are equal only if they come from the same pool offset with the
  same key, i.e. the same chunk of the same file of the same checkpoint.
Making a chunk is one pass over memory (numpy releases the GIL), far faster than a device.

Buffers come from anonymous mmap: page-aligned, as O_DIRECT needs (open(2), "O_DIRECT").
"""
from __future__ import annotations

import mmap

import numpy as np
import xxhash

POOL_MIN_BYTES = 16 * 2**20
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
            self.words[i:i + n] = rng.integers(0, 2**64, size=n, dtype=np.uint64, endpoint=False)
        self.chunk_words = -(-chunk_bytes // 8)

    @property
    def nbytes(self) -> int:
        return self.words.nbytes

    def fill(self, out: np.ndarray, key: int, nbytes: int) -> None:
        """Write `nbytes` (rounded up to 8) of chunk `key` into `out` (a uint64 view of a buffer)."""
        n = -(-nbytes // 8)
        span = len(self.words) - n
        start = key % (span + 1)
        np.bitwise_xor(self.words[start:start + n], np.uint64(key), out=out[:n])


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
