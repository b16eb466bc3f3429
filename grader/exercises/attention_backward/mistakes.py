"""attention_backward's known mistakes, named by their answers: the backward's (the D term left
out or taken from dO, P from a running max, the scale missing or applied twice in dQ or dK, the
short last key block skipped, the causal mask strict, missing or applied to whole blocks only;
dQ accumulated in float16; a normalizer of its own instead of the L given) and the forward's L
(log(l) without m, log2). reference.backward_reference computes each mistake's gradients; a
hint is shown only when the student's output equals that mistake's answer, and when none does
the hint says which gradient differs and where (what_differs), nothing more."""

from __future__ import annotations

import numpy as np

from grader.exercises.attention_backward.reference import backward_reference
from grader.judge.answers import diagnose, reference
from grader.judge.answers.compare import numpy_tolerance, values


# the backward: the answer of each known mistake (reference.backward_reference's `mistake`)
MISTAKES = {
    "no_D": "dQ and dK equal the gradients without the D term: the D trick, D = rowsum(dO o O), "
            "one number per row, and dS = P o (dP - D), not P o dP.",
    "D_from_dO": "dQ and dK equal the gradients with D = rowsum(dO o dO): the D trick is "
                 "D = rowsum(dO o O), the output O, not dO, times the incoming gradient "
                 "(sum_j P_ij dP_ij = dO_i . O_i).",
    "running_max": "The gradients equal those of P = e^(S - m) with m a running max over the key "
                   "blocks: recompute instead of remember rebuilds the exact probabilities from "
                   "L, P = e^(S - L); no running max is needed, L already is the normalizer.",
    "dK_unscaled": "dK is sqrt(d) times too large: the scale is missing in dK; "
                   "dK += dS^T Q * scale, with scale = 1/sqrt(d).",
    "dQ_unscaled": "dQ is sqrt(d) times too large: the scale is missing in dQ; "
                   "dQ += dS K * scale, with scale = 1/sqrt(d).",
    "dK_scaled_twice": "dK is sqrt(d) times too small: the scale is applied twice in dK; "
                       "S = Q K^T * scale carries it once, dK += dS^T Q * scale.",
    "dQ_scaled_twice": "dQ is sqrt(d) times too small: the scale is applied twice in dQ; "
                       "S = Q K^T * scale carries it once, dQ += dS K * scale.",
    "last_block_skipped": "The gradients equal those with the short last key block (keys {lo}.."
                          "{hi}, fewer than Bc = {Bc}) left out: loop over range(0, N, Bc) and "
                          "slice K[j:j + Bc]; the last slice is simply shorter.",
    "mask_strict": "The gradients equal those of a backward that hides the diagonal too (key j "
                   "visible only when j < i): query i sees keys j <= i, in the backward as in "
                   "the forward.",
    "mask_missing": "The gradients equal those of attention without the causal mask: the "
                    "backward walks the forward's tiles, skips blocks above the diagonal and "
                    "masks j > i in the blocks that cross it, so P is 0 there.",
    "diagonal_unmasked": "The gradients equal those of a backward that skips the blocks above "
                         "the diagonal but does not mask the ones that cross it: mask s where "
                         "j > i in every key block that reaches past the query block's first "
                         "row (j + Bc - 1 > i), so P is 0 there.",
}
# dQ alone off by about float16's rounding: the evidence of a float16 accumulator
DQ_LOW_PRECISION_HINT = ("Only dQ is off, and by {rel:.1e} of its largest entry: about float16's "
                         "rounding (2^-11 = 4.9e-4), while dK and dV are right. Is dQ accumulated "
                         "in float16 (np.zeros(..., np.float16), or Q's dtype)? Accumulate dQ in "
                         "float32 or better, as dK and dV are.")

# the forward's L
LSE_NO_M_HINT = ("L equals log(l) without the max: L = m + log(l), the log of the whole row's "
                 "softmax denominator, so that P = e^(S - L) comes out right in the backward pass.")
LSE_LOG2_HINT = ("L equals m + log2(l): use the natural log, L = m + log(l) (np.log), the base "
                 "that e^(S - L) undoes.")


def close(got, want) -> bool:
    """Whether an answer equals `want` to 1e-3 relative: the test for a known mistake's answer."""
    g = np.asarray(values(got), np.float64)
    return g.shape == want.shape and bool(np.all(np.abs(g - want) <= 1e-3 * (1 + np.abs(want))))


def mistakes_for(N, causal, Bc):
    """The known mistakes (MISTAKES) that give an answer of their own on this case."""
    out = [m for m in MISTAKES if m not in ("mask_strict", "mask_missing", "diagonal_unmasked")
           or causal]
    if not (Bc and N % Bc):
        out.remove("last_block_skipped")        # no short last block to skip
    return out


def backward_hint(got, Q, K, V, O, L, dO, causal, Br, Bc, L_true=None) -> str:
    """The hint the evidence supports: a known mistake's, when the student's gradients equal its
    answer; with L_true (the L given was shifted from it), the gradients of L_true; dQ alone off
    by float16 rounding; else which gradient differs and where (what_differs)."""
    try:
        dq, dk, dv = got
    except (TypeError, ValueError):
        return ""
    N = Q.shape[0]
    for mistake in mistakes_for(N, causal, Bc):
        want = backward_reference(Q, K, V, O, L, dO, causal, mistake, Bc, Br)
        if all(close(g, w) for g, w in zip((dq, dk, dv), want)):
            lo = (N - 1) // Bc * Bc
            return MISTAKES[mistake].format(lo=lo, hi=N - 1, Bc=Bc)
    want = backward_reference(Q, K, V, O, L, dO, causal)
    if L_true is not None:
        true = backward_reference(Q, K, V, O, L_true, dO, causal)
        if all(close(g, w) for g, w in zip((dq, dk, dv), true)):
            return IGNORES_L_HINT
    wrong = wrong_rows(got, want, Q.dtype.name, N)
    if wrong is None:
        return ""
    if wrong[0].any() and not wrong[1].any() and not wrong[2].any():
        g = np.asarray(values(dq), np.float64)
        rel = float(np.abs(g - want[0]).max() / max(np.abs(want[0]).max(), 1e-30))
        if 5e-5 <= rel <= 1e-2:
            return DQ_LOW_PRECISION_HINT.format(rel=rel)
    return what_differs(wrong, N, causal, Br, Bc)


NO_MATCH = "No known mistake's answer matches."
IGNORES_L_HINT = ("The gradients equal those of the row's true logsumexp, not of the L given (the "
                  "true one shifted per row here): the backward found its own normalizer instead "
                  "of using L. Recompute instead of remember: P = e^(S - L), with the L passed in.")


def wrong_rows(got, want, dtype, N):
    """Per gradient (dQ, dK, dV), which rows are outside the check's tolerance (None when a
    shape is wrong)."""
    atol, rtol = numpy_tolerance(dtype, N)
    out = []
    for g, w in zip(got, want):
        g = np.asarray(values(g), np.float64)
        if g.shape != w.shape:
            return None
        with np.errstate(all="ignore"):
            bad = ~(np.abs(g - w) <= atol + rtol * np.abs(w))
        out.append(bad.reshape(len(w), -1).any(axis=1))
    return out


def what_differs(wrong, N, causal, Br, Bc) -> str:
    """Which gradients are wrong, and in which rows, said as blocks where they line up: no
    mistake is named, none matched."""
    names = ("dQ", "dK", "dV")
    bad = [n for n, w in zip(names, wrong) if w.any()]
    if not bad:
        return ""
    right = [n for n in names if n not in bad]
    parts = []
    for name, w in zip(names, wrong):
        if w.any():
            block = Br if name == "dQ" else Bc
            parts.append(f"{name} in {diagnose.rows_named(w, block, 'query' if name == 'dQ' else 'key')}")
    return (f"{NO_MATCH} What differs: {'; '.join(parts)}"
            + (f"; {', '.join(right)} right" if right else "") + ".")


def lse_hint(got_L, Q, K, causal=False) -> str:
    """The hint when L is log(l) without m, or m + log2(l)."""
    S = reference.causal_scores(Q, K, causal)
    m = S.max(axis=1)
    l = np.exp(S - m[:, None]).sum(axis=1)
    if close(got_L, np.log(l)):
        return LSE_NO_M_HINT
    if close(got_L, m + np.log2(l)):
        return LSE_LOG2_HINT
    return ""
