"""Wrong on purpose (tests/wrong): tiled_attention in (Br, Bc) tiles, but two passes over the key
blocks of each query block: the first finds each row's max, the second sums exp(s - max) and
p @ v against that fixed max. Right answers and tiled memory, but the lesson's online rescale
(alpha = exp(m - m_new), one pass over K and V) is skipped (issue 18)."""
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
    for i in range(0, N, Br):
        q = Q[i:i + Br]
        m = np.full(q.shape[0], -np.inf, dtype=Q.dtype)
        for j in range(0, N, Bc):                          # pass 1: each row's max
            s = q @ K[j:j + Bc].T
            s *= scale
            np.maximum(m, s.max(axis=1), out=m)
        l = np.zeros(q.shape[0], dtype=Q.dtype)
        acc = np.zeros_like(q)
        for j in range(0, N, Bc):                          # pass 2: sums against the fixed max
            s = q @ K[j:j + Bc].T
            s *= scale
            s -= m[:, None]
            np.exp(s, out=s)
            l += s.sum(axis=1)
            acc += s @ V[j:j + Bc]
        O[i:i + Br] = acc / l[:, None]
    return O
