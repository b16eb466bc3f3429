"""Correct, in another style: online softmax over chunks of 256 elements, as a GPU tile would
read them. Each chunk is reduced with NumPy (its max, then its sum of exp against it) and merged
into the running (m, l) with the merge rule, so x is read once, a chunk at a time. Arithmetic in
the input's own precision (float32 stays float32, float16 goes up to float32, as a kernel would),
and softmax_safe returns float64 whatever the input: at least as precise as the input.
"""
import math

import numpy as np

CHUNK = 256


def _work(x):
    x = np.asarray(x)
    return x.astype(np.promote_types(x.dtype, np.float32), copy=False)


def softmax_safe(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


def online_max_sum(x):
    x = _work(x)
    m, l = -math.inf, 0.0
    for start in range(0, x.size, CHUNK):
        chunk = x[start:start + CHUNK]
        m_c = float(chunk.max())
        if m_c == -math.inf:
            continue
        l_c = float(np.exp(chunk - chunk.dtype.type(m_c)).sum(dtype=chunk.dtype))
        m, l = merge((m, l), (m_c, l_c))
    return m, l


def softmax_online(x):
    x = np.asarray(x)
    m, l = online_max_sum(x)
    xw = _work(x)
    return (np.exp(xw - xw.dtype.type(m)) / xw.dtype.type(l)).astype(x.dtype)


def merge(a, b):
    (m_a, l_a), (m_b, l_b) = (float(a[0]), float(a[1])), (float(b[0]), float(b[1]))
    m = max(m_a, m_b)
    if m == -math.inf:
        return -math.inf, 0.0
    return m, l_a * math.exp(m_a - m) + l_b * math.exp(m_b - m)
