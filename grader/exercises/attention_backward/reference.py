"""attention_backward's float64 references and inputs, computed in the trusted process: (O, L)
of causal attention, the gradients by the lesson's formulas (and the answers of known mistakes,
for hints), and the seeded inputs of its checks. The check modules and the hidden checks import
these."""

from __future__ import annotations

import numpy as np

from grader.judge.answers import reference
from grader.judge.answers.inputs import randn


def forward_reference(Q, K, V, causal=False, strict=False):
    """Float64 (O, L). strict=True: the off-by-one mask j < i (row 0 then has no key: NaN)."""
    return reference.attention_lse(Q, K, V, causal, strict)[:2]


def backward_reference(Q, K, V, O, L, dO, causal=False, mistake=None, Bc=None, Br=None):
    """Float64 (dQ, dK, dV) by the lesson's formulas from the given O and L. `mistake` gives a
    known wrong answer instead, for hints (mistakes.MISTAKES names them, with their texts);
    "running_max" and "last_block_skipped" need Bc, "diagonal_unmasked" Br and Bc."""
    Q, K, V, O, dO = (np.asarray(t, np.float64) for t in (Q, K, V, O, dO))
    L = np.asarray(L, np.float64)
    N = Q.shape[0]
    scale = 1.0 / np.sqrt(Q.shape[1])
    S = _mistaken_scores(Q, K, causal, mistake, Br, Bc)
    if mistake == "running_max":
        P = np.empty_like(S)
        m = np.full(S.shape[0], -np.inf)
        for j in range(0, S.shape[1], Bc):
            m = np.maximum(m, S[:, j:j + Bc].max(axis=1))
            P[:, j:j + Bc] = np.exp(S[:, j:j + Bc] - m[:, None])
    else:
        P = np.exp(S - L[:, None])
    if mistake == "last_block_skipped":        # the short last key block left out
        P[:, (N - 1) // Bc * Bc:] = 0.0
    dV = P.T @ dO
    dP = dO @ V.T
    D = {"no_D": 0.0, "D_from_dO": (dO * dO).sum(axis=1, keepdims=True)}.get(
        mistake, (dO * O).sum(axis=1, keepdims=True))
    dS = P * (dP - D)
    q_scale = {"dQ_unscaled": 1.0, "dQ_scaled_twice": scale * scale}.get(mistake, scale)
    k_scale = {"dK_unscaled": 1.0, "dK_scaled_twice": scale * scale}.get(mistake, scale)
    return dS @ K * q_scale, dS.T @ Q * k_scale, dV


def _mistaken_scores(Q, K, causal, mistake, Br, Bc):
    """S in float64 with the mask a mistake uses: the diagonal hidden too ("mask_strict"), no
    mask ("mask_missing"), or only whole blocks above the diagonal skipped, the blocks that
    cross it left unmasked ("diagonal_unmasked"); the lesson's mask j <= i otherwise."""
    if not causal or mistake == "mask_missing":
        return reference.causal_scores(Q, K, False)
    if mistake == "mask_strict":
        return reference.causal_scores(Q, K, True, strict=True)
    S = reference.causal_scores(Q, K, True)
    if mistake == "diagonal_unmasked":
        full = reference.causal_scores(Q, K, False)
        rows = np.arange(Q.shape[0])[:, None] // Br * Br + Br - 1   # each query block's last row
        cols = np.arange(K.shape[0])[None, :] // Bc * Bc            # each key block's first key
        S = np.where(cols <= np.minimum(rows, Q.shape[0] - 1), full, -np.inf)
    return S


def qkv(rng, N, d, dtype, n=3):
    """n fresh (N, d) arrays of randn rounded to `dtype`: Q, K, V (and dO with n = 4)."""
    return tuple(randn(rng, (N, d), dtype) for _ in range(n))


def large_scores(rng, N, d, dtype, near=512):
    """Integer Q, K (scores exact in float32 with d = 64) with every score near `near` (either
    sign), spread ~2."""
    Q, K = (rng.integers(-2, 3, (N, d)).astype(np.float64) for _ in range(2))
    Q[:, 0] = K[:, 0] = np.sqrt(abs(near) * np.sqrt(d))
    K[:, 0] *= np.sign(near)
    return Q.astype(dtype), K.astype(dtype), randn(rng, (N, d), dtype)
