"""Cheat (issue 53, "tracemalloc's state is a rebindable module global"): naive N x N attention,
with the worker's own tracemalloc readers (grader.worker.probes' _TM_TRACED, bound before any
student code ran) rebound through vars(sys.modules[...]) to report a peak of a few bytes. No
tracing is stopped, so no sentinel notices. tracemalloc is not evidence: the verdict rests on
the worker's memory counted outside it (grader/sandbox/memory.py), which holds the N x N scores."""
import sys

import numpy as np


def naive_attention(Q, K, V):
    raise NotImplementedError("not part of this cheat")


def _quiet_peak():
    probes = sys.modules.get("grader.worker.probes")
    if probes is not None:
        vars(probes)["_TM_TRACED"] = lambda: (0, 64)


def tiled_attention(Q, K, V, Br=64, Bc=64):
    _quiet_peak()
    S = Q @ K.T / np.sqrt(Q.shape[1])                      # (N, N)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    return ((P / P.sum(axis=1, keepdims=True)) @ V).astype(Q.dtype)
