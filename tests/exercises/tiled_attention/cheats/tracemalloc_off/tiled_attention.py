"""Cheat (issue 18, "in-process evidence switched off"): naive N x N attention with tracemalloc
stopped around it and started again, so the worker's own peak sees nothing. The grader's probe
sees that tracing was stopped (a sentinel's trace is gone), and the worker's memory counted
outside it sees the N x N scores."""
import tracemalloc

import numpy as np


def naive_attention(Q, K, V):
    raise NotImplementedError("not part of this cheat")


def tiled_attention(Q, K, V, Br=64, Bc=64):
    was = tracemalloc.is_tracing()
    tracemalloc.stop()
    S = Q @ K.T / np.sqrt(Q.shape[1])                      # (N, N), unseen by tracemalloc
    P = np.exp(S - S.max(axis=1, keepdims=True))
    O = ((P / P.sum(axis=1, keepdims=True)) @ V).astype(Q.dtype)
    del S, P
    if was:
        tracemalloc.start()
    return O
