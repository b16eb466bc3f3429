"""attention_backward's adversarial checks (the Break It cases): scores large enough that
exp overflows, the row max in the last key block, and a backward that must use the L it is
given. Inputs, references and comparisons as in test_cpu.py (reference.py, judging.py).

  lse_includes_m              L = m + log(l) in the natural log, on scores near 512
  max_in_last_block           O and L when the row max sits in the last key block
  backward_recomputes_from_L  P = e^(S - L) from the L given, not from a running max
  backward_large_scores       scores near 800: exp(S) alone overflows
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.exercises.attention_backward.judging import check_backward, check_forward
from grader.exercises.attention_backward.mistakes import NO_MATCH
from grader.exercises.attention_backward.reference import large_scores, qkv
from grader.judge.answers.compare import CheckFailed
from grader.judge.answers.cases import Cases
from grader.judge.answers.inputs import randn


@pytest.mark.check("attention_backward.lse_includes_m")
def test_lse_includes_m(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    # every score near 512: log(l) alone is about 5, L about 517; in float32 exp(512) is inf.
    # Near -512 (rows of strongly negative scores): L about -507, and a running max started at
    # 0 instead of -inf makes every exp(s - m) underflow to 0 in float32
    for dtype, N, Br, Bc, near in (("float32", 150, 32, 48, 512), ("float64", 97, 16, 40, 512),
                                   ("float32", 70, 16, 24, -512)):
        Q, K, V = large_scores(rng, N, 64, dtype, near)
        label = f"every score near {near}"
        with cases.case(f"N={N}, d=64, {dtype}, Br={Br}, Bc={Bc}, {label}", seed=rng.seed):
            check_forward(sub, Q, K, V, Br, Bc, False, label, rng.seed,
                          hint="Start the running max at -inf, subtract it before exp, and "
                               "L = m + log(l).")
    cases.finish()


@pytest.mark.check("attention_backward.max_in_last_block")
def test_max_in_last_block(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for dtype, N, d, Br, Bc in (("float32", 200, 64, 32, 48), ("float64", 113, 32, 64, 16)):
        Q, K = (rng.integers(-1, 2, (N, d)).astype(np.float64) for _ in range(2))
        boosted = min(3, N - (N - 1) // Bc * Bc)
        Q[:, 0] = 1.0
        K[-boosted:, 0] += round(10 * np.sqrt(d))     # scores +10 in the last key block only
        Q, K, V = Q.astype(dtype), K.astype(dtype), randn(rng, (N, d), dtype)
        with cases.case(f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}", seed=rng.seed):
            check_forward(sub, Q, K, V, Br, Bc, False, "row max in the last key block", rng.seed,
                          hint="When the row max moves into the last block, acc and l are "
                               "rescaled by alpha = exp(m - m_new), and L = m + log(l) uses the "
                               "final m.")
    cases.finish()


@pytest.mark.check("attention_backward.backward_recomputes_from_L")
def test_backward_recomputes_from_L(student, rng, credit):
    """L + a known shift per row: the lesson's backward rebuilds P = e^(S - L) from the L it is
    given, so every gradient follows that L. A backward that finds its own normalizer (a running
    max, a second pass for l) does not."""
    sub = student()
    cases = Cases(credit)
    for dtype, N, d, Br, Bc in (("float64", 60, 32, 16, 24), ("float32", 45, 16, 8, 8)):
        Q, K, V, dO = qkv(rng, N, d, dtype, 4)
        shift = rng.uniform(-1.0, 1.0, N)
        with cases.case(f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}, L shifted by up to 1",
                        seed=rng.seed):
            try:
                check_backward(sub, Q, K, V, dO, Br, Bc, False, "L shifted per row", rng.seed,
                               L_shift=shift)
            except CheckFailed as e:
                raise CheckFailed(
                    f"{e}. L was the true logsumexp plus a per-row shift in [-1, 1]; expected the "
                    f"gradients of P = e^(S - L) with that L",
                    hint=e.hint) from None
    cases.finish()


@pytest.mark.check("attention_backward.backward_large_scores")
def test_backward_large_scores(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for causal in (False, True):
        Q, K, V = large_scores(rng, 130, 64, "float64", near=800)   # exp(800) is inf even in float64
        dO = randn(rng, (130, 64), "float64")
        with cases.case(f"N=130, d=64, float64, Br=32, Bc=48, causal={causal}, scores near 800",
                        seed=rng.seed):
            try:
                check_backward(sub, Q, K, V, dO, 32, 48, causal, "scores near 800", rng.seed)
            except CheckFailed as e:
                blew = "NaN" in str(e) or "overflowed" in str(e)
                named = e.hint and not e.hint.startswith(NO_MATCH)   # a known mistake's answer
                raise CheckFailed(str(e), hint=e.hint if named or not blew else (
                    "P = e^(S - L): with L the row's logsumexp every exponent is <= 0; e^S alone "
                    "overflows at scores near 800.")) from None
    cases.finish()
