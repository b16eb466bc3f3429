"""Cheat: tiled_attention builds the full N x N score matrix (the lesson's idea skipped: it is
naive attention under the tiled name, and ignores Br and Bc)."""
import numpy as np


def naive_attention(Q, K, V):
    raise NotImplementedError("not part of this cheat")


def tiled_attention(Q, K, V, Br=64, Bc=64):
    S = Q @ K.T / np.sqrt(Q.shape[1])                      # (N, N)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    return ((P / P.sum(axis=1, keepdims=True)) @ V).astype(Q.dtype)
