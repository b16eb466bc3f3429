"""Cheat (issue 18, "memory taken before the call"): a buffer for the N x N scores allocated and
touched at import, so a call allocates only its output; naive attention computed in it. Ignores
Br and Bc. The worker's memory counted outside it, against a fresh worker's, holds the buffer."""
import numpy as np

_BUF = np.ones(2048 * 2048, dtype=np.float64)              # 32 MiB, resident from the import


def naive_attention(Q, K, V):
    raise NotImplementedError("not part of this cheat")


def tiled_attention(Q, K, V, Br=64, Bc=64):
    N, d = Q.shape
    S = _BUF[:N * N].reshape(N, N)
    np.matmul(Q.astype(np.float64, copy=False), K.T.astype(np.float64, copy=False), out=S)
    S *= 1.0 / np.sqrt(d)
    S -= S.max(axis=1, keepdims=True)
    np.exp(S, out=S)
    S /= S.sum(axis=1, keepdims=True)
    return (S @ V).astype(Q.dtype)
