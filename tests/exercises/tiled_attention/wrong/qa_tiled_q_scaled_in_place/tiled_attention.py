# WRONG (qa_tiled_q_scaled_in_place): Q *= scale in place, the caller's array changes
"""Wrong: a tiled attention with right outputs that saves a multiply per tile by scaling Q in
place, changing the caller's array (a grader that computed its reference afterwards would
agree)."""
import numpy as np


def naive_attention(Q, K, V):
    S = Q @ K.T / np.sqrt(Q.shape[1])
    P = np.exp(S - S.max(axis=1, keepdims=True))
    return ((P / P.sum(axis=1, keepdims=True)) @ V).astype(Q.dtype)


def tiled_attention(Q, K, V, Br=64, Bc=64):
    Q *= Q.dtype.type(1.0 / np.sqrt(Q.shape[1]))     # in place: the caller's Q changes
    O = np.empty_like(Q)
    for i in range(0, Q.shape[0], Br):
        q = Q[i:i + Br]
        m = np.full(q.shape[0], -np.inf)
        l = np.zeros(q.shape[0])
        acc = np.zeros_like(q)
        for j in range(0, K.shape[0], Bc):
            s = q @ K[j:j + Bc].T
            m_new = np.maximum(m, s.max(axis=1))
            p = np.exp(s - m_new.astype(s.dtype)[:, None])
            alpha = np.exp(m - m_new)
            l = l * alpha + p.sum(axis=1)
            acc = acc * alpha.astype(acc.dtype)[:, None] + p @ V[j:j + Bc]
            m = m_new
        O[i:i + Br] = acc / l.astype(acc.dtype)[:, None]
    return O
