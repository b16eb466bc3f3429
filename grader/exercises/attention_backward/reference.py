"""attention_backward's float64 references and inputs, computed in the trusted process: (O, L)
of causal attention, the gradients by the lesson's formulas (and the answers of known mistakes,
for hints), and the seeded inputs of its checks. The check modules and the hidden checks import
these."""

from __future__ import annotations

import numpy as np

from grader.judge import reference
from grader.judge.inputs import randn


def forward_reference(Q, K, V, causal=False, strict=False):
    """Float64 (O, L). strict=True: the off-by-one mask j < i (row 0 then has no key: NaN)."""
    return reference.attention_lse(Q, K, V, causal, strict)[:2]


def backward_reference(Q, K, V, O, L, dO, causal=False, mistake=None, Bc=None):
    """Float64 (dQ, dK, dV) by the lesson's formulas from the given O and L. `mistake` gives a
    known wrong answer instead, for hints: "no_D", "running_max" (P = e^(S - m) with m the
    running max over key blocks of Bc), "dK_unscaled", "dQ_unscaled"."""
    Q, K, V, O, dO = (np.asarray(t, np.float64) for t in (Q, K, V, O, dO))
    L = np.asarray(L, np.float64)
    scale = 1.0 / np.sqrt(Q.shape[1])
    S = reference.causal_scores(Q, K, causal)
    if mistake == "running_max":
        P = np.empty_like(S)
        m = np.full(S.shape[0], -np.inf)
        for j in range(0, S.shape[1], Bc):
            m = np.maximum(m, S[:, j:j + Bc].max(axis=1))
            P[:, j:j + Bc] = np.exp(S[:, j:j + Bc] - m[:, None])
    else:
        P = np.exp(S - L[:, None])
    dV = P.T @ dO
    dP = dO @ V.T
    D = 0.0 if mistake == "no_D" else (dO * O).sum(axis=1, keepdims=True)
    dS = P * (dP - D)
    dQ = dS @ K * (1.0 if mistake == "dQ_unscaled" else scale)
    dK = dS.T @ Q * (1.0 if mistake == "dK_unscaled" else scale)
    return dQ, dK, dV


def qkv(rng, N, d, dtype, n=3):
    """n fresh (N, d) arrays of randn rounded to `dtype`: Q, K, V (and dO with n = 4)."""
    return tuple(randn(rng, (N, d), dtype) for _ in range(n))


def large_scores(rng, N, d, dtype, near=512):
    """Integer Q, K (scores exact in float32 with d = 64) with every score near `near`, spread ~2."""
    Q, K = (rng.integers(-2, 3, (N, d)).astype(np.float64) for _ in range(2))
    Q[:, 0] = K[:, 0] = np.sqrt(near * np.sqrt(d))
    return Q.astype(dtype), K.astype(dtype), randn(rng, (N, d), dtype)
