"""flash_backward's known mistakes and the hints that name them, each shown only when a check's
evidence matches the mistake it names.

What flash_bwd would return for each known mistake of the backward, in float64: the D trick left
out or taken from dO o dO, P from a running max or from L = m, the scale missing or applied twice
in dQ or dK, the causal mask strict, missing or applied to whole blocks only, the short last key
block skipped. judging.assert_grads compares a wrong answer with each; when one matches, the
failure's hint names that mistake, and when none does it says which gradient differs and where
(what_differs), nothing more. The other texts (the forward's L and mask, a race on dQ, dS in
float16, unmasked loads and stores) are picked by judging.py and the check modules from their
own evidence.

All arrays are (..., N, D); blocks are flash_bwd's BLOCK_M, BLOCK_N (None where the call chose
its own: the mistakes that depend on them are then not tried).
"""

from __future__ import annotations

import numpy as np

from grader.judge.answers import diagnose, reference
from grader.judge.answers.compare import values

# --------------------------------------------------------------- the forward: L and the mask

LSE_NO_M_HINT = ("Your L equals log(l) without the max: L = m + log(l). l is a sum of exp(s - m), "
                 "so log(l) alone is the logsumexp shifted by -m.")
LSE_LOG2_HINT = ("Your L equals the logsumexp in log base 2 (L * log2(e)): if you compute with "
                 "exp2 and m in log2 units, convert back: L = (m2 + log2(l)) * ln(2).")
LSE_IS_M_HINT = ("Your L equals the running max m alone: L = m + log(l), the max plus the log of "
                 "the row sum l, so that the backward's P = exp(S - L) is the exact softmax.")
STRICT_HINT = ("Your output equals attention with key j visible only for j < i: the diagonal is "
               "visible too. The causal mask is j <= i (cols <= rows).")
DIAGONAL_HINT = ("Right with BLOCK_M = BLOCK_N = {equal} on the same inputs, wrong with BLOCK_M={bm}, "
                 "BLOCK_N={bn}: with BLOCK_M != BLOCK_N a key block can cross the diagonal without "
                 "starting on it. Mask every key block that reaches past the query block's first "
                 "row (start + BLOCK_N > pid_m * BLOCK_M), on cols <= rows, and stop the loop at "
                 "min((pid_m + 1) * BLOCK_M, N).")

# --------------------------------------------------------------- the backward's gradients

RECOMPUTE_HINT = ("dV = P^T dO is wrong, and dV needs nothing but P: recompute instead of "
                  "remember, P = exp(S - L) with S = scale * Q K^T and the L the forward saved (the "
                  "one passed in), masked like the forward; not exp(S - a running max).")
DELTA_HINT = ("Your dK and dQ equal the gradients with dS = P * dP: the D term is missing. The D "
              "trick: D = rowsum(dO * O), one number per query row, and dS = P * (dP - D).")
SCALE_HINT = ("Your {name} equals the right one times sqrt(D): S = scale * Q K^T, so the scale "
              "1/sqrt(D) multiplies {name} too ({name} = scale * {formula}).")
DQ_ONLY_HINT = ("Only dQ is wrong; dK and dV are right, on sizes where many programs run at "
                "once (the interpreter runs them one at a time, so a race cannot show there): if "
                "several programs add into the same rows of dQ, a tl.load + tl.store of each "
                "share races and loses updates. Add the shares with tl.atomic_add into a "
                "zero-initialised float32 dQ (cast at the end), or give each query block its own "
                "program that loops over the key blocks (one writer per row, no atomics).")
DS_PRECISION_HINT = (
    "Right with dO and V at ordinary scale (the control call: the same q, k, dO / 1000, V / 10), "
    "wrong here, where |dP| = |dO V^T| reaches {dp:.3g}, past float16's 65504, while dS = P * "
    "(dP - D) stays under {ds:.2g}: keep dP, dP - D and dS in float32 (tl.dot accumulates in "
    "float32) and cast only dS, the operand of tl.dot, to float16. Casting dP or dP - D to "
    "float16 first turns them into inf here.")

# --------------------------------------------------------------- masks

MASK_HINTS = {
    "tl.load": "Mask every load on the rows and keys that exist (rows < N, cols < N): a load "
               "without mask= reads past the end of q, k, v (or dO, L, D) in the last block, "
               "even when tl.where sets those scores to -inf afterwards.",
    "tl.store": "Mask every store on the rows that exist (rows < N; cols < N for dK and dV).",
}

# the answer of each known mistake of the backward (grads, below): shown when the gradients
# equal it. {lo}, {hi}: the last key block's keys; {bm}, {bn}: the call's BLOCK_M, BLOCK_N
MISTAKE_HINTS = {
    "no_D": DELTA_HINT,
    "D_from_dO": ("Your dK and dQ equal the gradients with D = rowsum(dO * dO): the D trick is "
                  "D = rowsum(dO * O), the output O times the incoming gradient (one number per "
                  "query row, in _bwd_preprocess)."),
    "running_max": RECOMPUTE_HINT,
    "lse_is_m": ("Your gradients equal those of P = exp(S - m), m the row max, instead of "
                 "P = exp(S - L): the L given to the backward is m + log(l), and the backward "
                 "uses it as it is (if your forward stored m alone as lse, add log(l))."),
    "dK_unscaled": SCALE_HINT.format(name="dK", formula="dS^T Q"),
    "dQ_unscaled": SCALE_HINT.format(name="dQ", formula="dS K"),
    "dK_scaled_twice": ("Your dK equals the right one divided by sqrt(D): the scale is applied "
                        "twice in dK. S = scale * Q K^T carries it once: dK = scale * dS^T Q."),
    "dQ_scaled_twice": ("Your dQ equals the right one divided by sqrt(D): the scale is applied "
                        "twice in dQ. S = scale * Q K^T carries it once: dQ = scale * dS K."),
    "mask_strict": ("Your gradients equal those of a backward whose causal mask hides the "
                    "diagonal too (j < i): query i sees keys j <= i, cols <= rows, in both "
                    "backward kernels as in the forward."),
    "mask_missing": ("Your gradients equal those of attention without the causal mask: the "
                     "backward kernels must mask P where j > i (cols <= rows), as the forward "
                     "does."),
    "diagonal_unmasked": ("Your gradients equal those of a backward that skips the blocks above "
                          "the diagonal but masks nothing in the blocks that cross it "
                          "(BLOCK_M={bm}, BLOCK_N={bn}): P = 0 where cols > rows in every tile "
                          "that reaches past the diagonal."),
    "last_block_skipped": ("Your gradients equal those with the short last key block (keys "
                           "{lo}..{hi}, fewer than BLOCK_N={bn}) left out: launch cdiv(N, "
                           "BLOCK_N) key programs and loop to N, masking cols < N."),
}


# --------------------------------------------------------------- the backward's answers

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
