"""Correct, but prints a lot: its output is captured and shown, shortened, under each check."""
import sys

import numpy as np

print("hello from import")


def softmax_safe(x):
    print("debug: softmax_safe got", x.shape, "x" * 5000)
    print("to stderr", file=sys.stderr)
    m = x.max()
    e = np.exp(x - m)
    return e / e.sum()


def online_max_sum(x):
    m, l = -np.inf, 0.0
    for xi in np.asarray(x, dtype=np.float64).tolist():
        m_new = max(m, xi)
        l = l * np.exp(m - m_new) + np.exp(xi - m_new)
        m = m_new
    return float(m), float(l)


def softmax_online(x):
    m, l = online_max_sum(x)
    return (np.exp(x.astype(np.float64) - m) / l).astype(x.dtype)


def merge(a, b):
    m = max(a[0], b[0])
    if m == -np.inf:
        return -np.inf, 0.0
    return m, a[1] * np.exp(a[0] - m) + b[1] * np.exp(b[0] - m)
