"""Cheat (issue 53, "the sentinel only notices stop() and clear_traces()"): naive N x N
attention, the scores freed, then tracemalloc.reset_peak(): tracing never stopped, every trace
kept, so the worker's probe sees a peak of a few bytes and no tampering. The verdict rests on
the worker's memory counted outside it (grader/sandbox/memory.py), which holds the N x N scores
while they live."""
import tracemalloc

import numpy as np


def naive_attention(Q, K, V):
    raise NotImplementedError("not part of this cheat")


def tiled_attention(Q, K, V, Br=64, Bc=64):
    S = Q @ K.T / np.sqrt(Q.shape[1])                      # (N, N)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    O = ((P / P.sum(axis=1, keepdims=True)) @ V).astype(Q.dtype)
    del S, P
    tracemalloc.reset_peak()                               # the peak is now the output's
    return O
