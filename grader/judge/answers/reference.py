"""Float64 references, computed in the trusted process from the exact inputs."""

from __future__ import annotations

import numpy as np


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def max_sum(x: np.ndarray) -> tuple[float, float]:
    """(m, l) of the safe softmax: m = max(x), l = sum(exp(x - m))."""
    x = np.asarray(x, dtype=np.float64)
    m = float(x.max())
    return m, float(np.exp(x - m).sum())


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """softmax(q k^T / sqrt(d)) v over the last two axes, in float64. q: (..., N, d)."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    return softmax(s) @ v


def causal_scores(q, k, causal: bool = False, strict: bool = False) -> np.ndarray:
    """S = q k^T / sqrt(d) in float64 over the last two axes, -inf above the diagonal when causal
    (key j after query i: j > i); strict: the off-by-one mask j >= i as well (for hints)."""
    q, k = (np.asarray(t, dtype=np.float64) for t in (q, k))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tri(q.shape[-2], k.shape[-2], k=-1 if strict else 0, dtype=bool), s, -np.inf)
    return s


def attention_lse(q, k, v, causal: bool = False, strict: bool = False):
    """(o, L, m) in float64: o = softmax(S) v, L = m + log(l), m the row max. A row with no key
    (only with strict) gets o = nan, L = -inf."""
    s = causal_scores(q, k, causal, strict)
    with np.errstate(all="ignore"):
        m = s.max(-1, keepdims=True)
        p = np.exp(s - m)
        l = p.sum(-1, keepdims=True)
        o = (p @ np.asarray(v, dtype=np.float64)) / l
        return o, (m + np.log(l))[..., 0], m[..., 0]


def attention_grads(q, k, v, do, causal: bool = False, with_delta: bool = True):
    """(dq, dk, dv) of attention in float64, analytic; with_delta=False: the D term left out
    (dS = P o dP), a known mistake's answer."""
    q, k, v, do = (np.asarray(t, dtype=np.float64) for t in (q, k, v, do))
    scale = 1 / np.sqrt(q.shape[-1])
    o, L, _ = attention_lse(q, k, v, causal)
    p = np.exp(causal_scores(q, k, causal) - L[..., None])
    dv = np.swapaxes(p, -1, -2) @ do
    dp = do @ np.swapaxes(v, -1, -2)
    delta = (do * o).sum(-1, keepdims=True) if with_delta else 0.0
    ds = p * (dp - delta)
    return scale * ds @ k, scale * np.swapaxes(ds, -1, -2) @ q, dv
