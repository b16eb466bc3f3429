"""Correct, in another style: the block rule written with np.einsum, running state kept as
column vectors, the last blocks sliced with min(), and the output normalised row block by row
block at the end of each query block."""
import numpy as np


def naive_attention(Q, K, V):
    d = Q.shape[1]
    S = np.einsum("id,jd->ij", Q, K) / np.sqrt(d)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    return np.einsum("ij,jd->id", P, V).astype(Q.dtype, copy=False)


def tiled_attention(Q, K, V, Br=64, Bc=64):
    N, d = Q.shape
    scale = Q.dtype.type(1.0 / np.sqrt(d))
    O = np.empty_like(Q)
    for i0 in range(0, N, Br):
        i1 = min(i0 + Br, N)
        q = Q[i0:i1]
        m = np.full((i1 - i0, 1), -np.inf, dtype=Q.dtype)
        l = np.zeros((i1 - i0, 1), dtype=Q.dtype)
        acc = np.zeros((i1 - i0, d), dtype=Q.dtype)
        for j0 in range(0, N, Bc):
            j1 = min(j0 + Bc, N)
            s = np.einsum("id,jd->ij", q, K[j0:j1]) * scale
            m_new = np.maximum(m, s.max(axis=1, keepdims=True))
            p = np.exp(s - m_new)
            alpha = np.exp(m - m_new)
            l = alpha * l + p.sum(axis=1, keepdims=True)
            acc = alpha * acc + np.einsum("ij,jd->id", p, V[j0:j1])
            m = m_new
        O[i0:i1] = acc / l
    return O
