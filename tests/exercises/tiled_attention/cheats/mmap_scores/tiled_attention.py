"""Cheat (issue 9, "memory tracemalloc cannot see"): full N x N attention whose scores live in an
anonymous mmap, which tracemalloc does not trace. Ignores Br and Bc. The worker's peak resident
memory (VmHWM, or the cgroup's memory.peak) sees the N x N matrix."""
import mmap

import numpy as np


def naive_attention(Q, K, V):
    raise NotImplementedError("not part of this cheat")


def tiled_attention(Q, K, V, Br=64, Bc=64):
    N, d = Q.shape
    buf = mmap.mmap(-1, N * N * Q.dtype.itemsize)              # anonymous: not NumPy's allocator
    S = np.frombuffer(buf, dtype=Q.dtype).reshape(N, N)
    np.matmul(Q, K.T, out=S)                                   # (N, N) scores, in place
    S *= Q.dtype.type(1.0 / np.sqrt(d))
    S -= S.max(axis=1, keepdims=True)
    np.exp(S, out=S)
    S /= S.sum(axis=1, keepdims=True)
    O = (S @ V).astype(Q.dtype, copy=False)
    del S
    try:
        buf.close()
    except BufferError:
        pass
    return O
