"""Cheat: tiled_attention builds the full N x N score matrix (it is naive_attention)."""
import numpy as np


def naive_attention(Q, K, V):
    S = Q @ K.T / np.sqrt(Q.shape[1])                      # (N, N)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    return ((P / P.sum(axis=1, keepdims=True)) @ V).astype(Q.dtype)


def tiled_attention(Q, K, V, Br=64, Bc=64):
    return naive_attention(Q, K, V)
