"""What flash_bwd would return for each known mistake of the backward, in float64 (for hints):
the D trick left out or taken from dO o dO, P from a running max or from L = m, the scale
missing or applied twice in dQ or dK, the causal mask strict, missing or applied to whole blocks
only, the short last key block skipped. judging.assert_grads compares a wrong answer with each;
when one matches, the failure's hint names that mistake, and when none does it says which
gradient differs and where (what_differs), nothing more.

All arrays are (..., N, D); blocks are flash_bwd's BLOCK_M, BLOCK_N (None where the call chose
its own: the mistakes that depend on them are then not tried).
"""

from __future__ import annotations

import numpy as np

from grader.exercises.flash_backward.hints import MISTAKE_HINTS
from grader.judge.answers import diagnose, reference
from grader.judge.answers.compare import values


def grads(q, k, v, do, causal, mistake=None, bm=None, bn=None):
    """(dq, dk, dv) in float64 by the lesson's formulas, or `mistake`'s answer (MISTAKE_HINTS)."""
    q, k, v, do = (np.asarray(t, np.float64) for t in (q, k, v, do))
    N, D = q.shape[-2:]
    scale = 1 / np.sqrt(D)
    o, L, m = reference.attention_lse(q, k, v, causal)
    s = _scores(q, k, causal, mistake, bm, bn)
    if mistake == "running_max":      # each key block's own row max, as tl.max(s, axis=1) gives
        p = np.empty_like(s)
        raw = reference.causal_scores(q, k, False)
        for j in range(0, N, bn):
            blk = raw[..., j:j + bn]
            tile = blk.max(-1, keepdims=True)
            if blk.shape[-1] < bn:    # the padded keys were loaded as 0: they score 0
                tile = np.maximum(tile, 0.0)
            p[..., j:j + bn] = np.exp(s[..., j:j + bn] - tile)
    else:
        p = np.exp(s - (m if mistake == "lse_is_m" else L)[..., None])
    if mistake == "last_block_skipped":
        p[..., (N - 1) // bn * bn:] = 0.0
    dv = np.swapaxes(p, -1, -2) @ do
    dp = do @ np.swapaxes(v, -1, -2)
    delta = {"no_D": 0.0, "D_from_dO": (do * do).sum(-1, keepdims=True)}.get(
        mistake, (do * o).sum(-1, keepdims=True))
    ds = p * (dp - delta)
    q_scale = {"dQ_unscaled": 1.0, "dQ_scaled_twice": scale * scale}.get(mistake, scale)
    k_scale = {"dK_unscaled": 1.0, "dK_scaled_twice": scale * scale}.get(mistake, scale)
    return ds @ k * q_scale, np.swapaxes(ds, -1, -2) @ q * k_scale, dv


def _scores(q, k, causal, mistake, bm, bn):
    """The scaled scores with the mask a mistake uses (-inf where a key is hidden)."""
    if not causal or mistake == "mask_missing":
        return reference.causal_scores(q, k, False)
    if mistake == "mask_strict":
        return reference.causal_scores(q, k, True, strict=True)
    if mistake == "diagonal_unmasked":   # whole blocks above the diagonal skipped, no mask
        N = q.shape[-2]
        last_row = np.minimum(np.arange(N) // bm * bm + bm - 1, N - 1)[:, None]
        first_col = (np.arange(N) // bn * bn)[None, :]
        return np.where(first_col <= last_row, reference.causal_scores(q, k, False), -np.inf)
    return reference.causal_scores(q, k, True)


def candidates(N, causal, bm, bn):
    """The mistakes that give an answer of their own on this case."""
    out = ["no_D", "D_from_dO", "lse_is_m", "dK_unscaled", "dQ_unscaled", "dK_scaled_twice",
           "dQ_scaled_twice"]
    if causal:
        out += ["mask_strict", "mask_missing"]
    if bn:
        out.append("running_max")
        if N % bn:
            out.append("last_block_skipped")
    if causal and bm and bn:
        out.append("diagonal_unmasked")
    return out


def near(a, b) -> bool:
    """a equals b to 2 % of b's largest entry: what a float16 kernel's rounding allows."""
    return a.shape == b.shape and np.allclose(a, b, rtol=2e-2,
                                              atol=2e-2 * max(1.0, float(np.abs(b).max())))


def grad_hint(got, q, k, v, do, causal, bm=None, bn=None) -> str:
    """The hint the evidence supports: the known mistake whose answer the gradients equal, dQ
    alone off by rounding, else what differs."""
    g = [np.asarray(values(t), dtype=np.float64) for t in got]
    ref = grads(q, k, v, do, causal)
    if any(a.shape != b.shape for a, b in zip(g, ref)):
        return ""
    N = q.shape[-2]
    for mistake in candidates(N, causal, bm, bn):
        want = grads(q, k, v, do, causal, mistake, bm, bn)
        wrong = [not near(a, r) for a, r in zip(g, ref)]
        # the gradients the mistake changes equal its answer; the others are right
        if all(near(a, w) for a, w in zip(g, want)) and any(wrong):
            lo = (N - 1) // bn * bn if bn else 0
            return MISTAKE_HINTS[mistake].format(lo=lo, hi=N - 1, bn=bn, bm=bm)
    return what_differs(g, ref, N, bm, bn)


def what_differs(g, ref, N, bm, bn) -> str:
    """Which of dq, dk, dv are off (beyond 2 % of their largest entry) and in which rows."""
    parts, right = [], []
    for name, a, r in zip(("dq", "dk", "dv"), g, ref):
        tol = 2e-2 * max(1.0, float(np.abs(r).max()))
        with np.errstate(invalid="ignore"):
            bad = ~(np.abs(a - r) <= tol)
        rows = bad.reshape(-1, N, a.shape[-1]).any(axis=(0, 2))
        if not rows.any():
            right.append(name)
            continue
        block = bm if name == "dq" else bn
        parts.append(f"{name} in {diagnose.rows_named(rows, block, 'query' if name == 'dq' else 'key')}")
    if not parts:
        return ""
    return (f"{NO_MATCH} What differs: {'; '.join(parts)}"
            + (f"; {', '.join(right)} right" if right else "") + ".")


NO_MATCH = "No known mistake's answer matches (beyond float16 rounding)."
