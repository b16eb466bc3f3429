"""Wrong on purpose (tests/wrong): tiled_attention one whole query row at a time, every key at
once (s = K @ q), with the row's scores kept in place in the input's dtype: O(N) memory, small
enough to pass for a few tiles, but no Bc tiling of the keys and no online rescale (issue 18)."""
import numpy as np


def naive_attention(Q, K, V):
    d = Q.shape[1]
    S = Q @ K.T
    S *= 1.0 / np.sqrt(d)
    S -= S.max(axis=1, keepdims=True)
    np.exp(S, out=S)
    S /= S.sum(axis=1, keepdims=True)
    return (S @ V).astype(Q.dtype, copy=False)


def tiled_attention(Q, K, V, Br=64, Bc=64):
    N, d = Q.shape
    scale = Q.dtype.type(1.0 / np.sqrt(d))
    O = np.empty_like(Q)
    s = np.empty(N, dtype=Q.dtype)                         # one row of N scores, reused
    for i in range(N):
        np.matmul(K, Q[i], out=s)                          # every key at once: no Bc tiles
        s *= scale
        s -= s.max()
        np.exp(s, out=s)
        np.matmul(s, V, out=O[i])
        O[i] /= s.sum()
    return O
