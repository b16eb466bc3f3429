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
