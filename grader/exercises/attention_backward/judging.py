"""How attention_backward's checks call the student and judge the answers: tiled_attention_lse's
O and L and tiled_backward's dQ, dK, dV against float64 (grader.judge.compare's tolerances), with
the hint of a known mistake when the answer equals its. The backward is given the reference O and
L (rounded to the input dtype), so a wrong forward never costs backward points. The check
modules and the hidden checks import these."""

from __future__ import annotations

import numpy as np

from grader.exercises.attention_backward.hints import LSE_LOG2_HINT, LSE_NO_M_HINT, MISTAKES
from grader.exercises.attention_backward.reference import backward_reference, forward_reference
from grader.judge import reference
from grader.judge.compare import CheckFailed, assert_close, values
from grader.judge.inputs import round_to


def close(got, want) -> bool:
    """Whether an answer equals `want` to 1e-3 relative: the test for a known mistake's answer."""
    g = np.asarray(values(got), np.float64)
    return g.shape == want.shape and bool(np.all(np.abs(g - want) <= 1e-3 * (1 + np.abs(want))))


def backward_hint(got, Q, K, V, O, L, dO, causal, Bc) -> str:
    """The hint of a known mistake when the student's gradients equal its answer, else ''."""
    try:
        dq, dk, dv = got
    except (TypeError, ValueError):
        return ""
    for mistake, hint in MISTAKES.items():
        want = backward_reference(Q, K, V, O, L, dO, causal, mistake, Bc)
        if all(close(g, w) for g, w in zip((dq, dk, dv), want)):
            return hint
    return ""


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


# ------------------------------------------------------------------ calling the student

def unpack(got, what, n):
    """The n arrays a call returned, as a tuple; CheckFailed when it returned anything else."""
    try:
        parts = tuple(got)
    except TypeError:
        parts = ()
    if len(parts) != n:
        raise CheckFailed(f"{what}: expected a tuple of {n} arrays, got {type(got).__name__}"
                          + (f" of length {len(parts)}" if parts else ""))
    return parts


def check_forward(sub, Q, K, V, Br, Bc, causal, case, seed, hint=""):
    """Call tiled_attention_lse and compare O and L with float64. Returns nothing."""
    what = f"tiled_attention_lse(Q, K, V, Br={Br}, Bc={Bc}, causal={causal})"
    got = sub.tiled_attention_lse(Q, K, V, Br, Bc, causal=causal)
    O, L = unpack(got, what, 2)
    O_ref, L_ref = forward_reference(Q, K, V, causal)
    N, d = Q.shape
    label = f"N={N}, d={d}, {Q.dtype.name}, {case}"
    try:
        assert_close(L, L_ref, what=f"{what}: L", input_dtype=Q.dtype.name, terms=N,
                     case=label, seed=seed)
    except CheckFailed as e:
        raise CheckFailed(str(e), hint=lse_hint(L, Q, K, causal) or hint) from None
    assert_close(O, O_ref, what=f"{what}: O", input_dtype=Q.dtype.name, terms=N, case=label,
                 seed=seed)


def check_backward(sub, Q, K, V, dO, Br, Bc, causal, case, seed, L_shift=None):
    """Call tiled_backward with the reference O and L (rounded to Q's dtype; L + L_shift where
    given) and compare dQ, dK, dV with the lesson's formulas in float64."""
    dtype = Q.dtype.name
    O_ref, L_ref = forward_reference(Q, K, V, causal)
    O = round_to(O_ref, dtype)
    L = L_ref + (0.0 if L_shift is None else L_shift)
    what = f"tiled_backward(Q, K, V, O, L, dO, Br={Br}, Bc={Bc}, causal={causal})"
    got = unpack(sub.tiled_backward(Q, K, V, O, L, dO, Br, Bc, causal=causal), what, 3)
    want = backward_reference(Q, K, V, O, L, dO, causal)
    N, d = Q.shape
    label = f"N={N}, d={d}, {dtype}, {case}"
    try:
        for name, g, w in zip(("dQ", "dK", "dV"), got, want):
            # dQ and dK sum N products of P, dP and K or Q: float32 rounding grows with |dS|
            assert_close(g, w, what=f"{what}: {name}", input_dtype=dtype, terms=N, case=label,
                         seed=seed)
    except CheckFailed as e:
        raise CheckFailed(str(e), hint=backward_hint(got, Q, K, V, O, L, dO, causal, Bc)) from None
