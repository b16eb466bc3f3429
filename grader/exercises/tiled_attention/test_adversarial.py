"""adversarial checks for exercises/tiled_attention.py (lesson: Break It 2, and the running max
that keeps exp in range). One idea per check:

  max_in_last_block      Break It 2: the row max moves into the last key block (alpha)
  one_pass_over_keys     one pass over the key blocks, no pass for the max alone first
                         (advice, no points: K and V's read logs, built in the worker)
  large_scores           scores that overflow exp without the max subtracted
  negative_scores        rows whose scores are all far below 0 (the running max starts at -inf)

Calls, the memory gate and the comparison are judging.py's, as in the cpu checks (test_cpu.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.exercises.tiled_attention.judging import (check_naive, check_tiled, one_pass_over_keys,
                                                     tiled_call)
from grader.exercises.tiled_attention.reference import DTYPES
from grader.judge.answers import reference
from grader.judge.answers.compare import CheckFailed, answer_must_be_right, assert_close
from grader.judge.answers.cases import Cases
from grader.judge.answers.inputs import randn

# the label of each call in a case's name
NAMES = {check_tiled: "tiled_attention", check_naive: "naive_attention"}


def _blew_up(e: CheckFailed) -> bool:
    """The failure is NaN or inf where the reference is finite: the evidence of exp overflowing
    or of a row sum of 0. A finite wrong answer points elsewhere (the hint then says so)."""
    return "got NaN" in str(e) or "overflowed" in str(e)


OFF_BUT_FINITE = ("The output is finite but wrong here, so exp did not overflow or underflow: "
                  "the checks above (the block rule, alpha, ragged sizes) say what differs.")



def max_in_last(rng, N: int, d: int, Bc: int, dtype: str):
    """(Q, K, V, boosted): Q and K with entries in {-1, 0, 1}: scores ~ N(0, 0.67^2). Every
    query gets 1 as its first coordinate and the last few keys (all in the last key block)
    about 10 * sqrt(d) on theirs, so their scores rise by 10: every row's max appears only in
    the last block, where alpha ~ e^-8. Random data alone mostly hides a missing rescale of
    acc; this makes it loud. Integer Q and K keep q . k exact in float32."""
    Q, K = (rng.integers(-1, 2, (N, d)).astype(np.float64) for _ in range(2))
    boosted = min(3, N - (N - 1) // Bc * Bc)
    Q[:, 0] = 1.0
    K[-boosted:, 0] += round(10 * np.sqrt(d))
    return Q.astype(dtype), K.astype(dtype), randn(rng, (N, d), dtype), boosted


@pytest.mark.check("tiled_attention.max_in_last_block")
def test_max_in_last_block(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    # (N, d, Br, Bc): the last key block is short (8, 1 and 40 keys)
    for dtype in DTYPES:
        for N, d, Br, Bc in ((200, 64, 32, 48), (113, 128, 64, 16), (1000, 64, 64, 64)):
            Q, K, V, boosted = max_in_last(rng, N, d, Bc, dtype)
            with cases.case(f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}", seed=rng.seed):
                try:
                    check_tiled(sub, Q, K, V, Br, Bc,
                           f"Br={Br}, Bc={Bc}, row max in the last key block (last {boosted} keys)",
                           rng.seed)
                except CheckFailed as e:
                    if e.follows is not None:   # the memory gate's failure, as it is
                        raise
                    raise CheckFailed(str(e), hint=e.hint or "Break It 2: right until the row max moves into "
                                      "a later key block. Is acc rescaled by alpha = "
                                      "exp(m - m_new), as l is?") from None
    cases.finish()


@pytest.mark.check("tiled_attention.one_pass_over_keys")
def test_one_pass_over_keys(student, rng):
    """Advice, no points (Check.advice): K and V arrive as arrays that log the rows each NumPy
    operation reads (grader/worker/row_recorder.py); more passes over K than over V is a pass for
    the row max alone, then sums against a fixed max (judging.one_pass_over_keys). Right on
    these inputs (the max in the last block), so max_in_last_block pays for them; the log is
    built in the student's process, so it teaches and pays nothing (docs/SECURITY.md)."""
    sub = student()
    for N, d, Br, Bc in ((200, 64, 32, 48), (113, 128, 64, 16)):
        Q, K, V, boosted = max_in_last(rng, N, d, Bc, "float32")
        case = f"Br={Br}, Bc={Bc}, row max in the last key block (last {boosted} keys)"
        what, label = f"tiled_attention(Q, K, V, Br={Br}, Bc={Bc})", f"N={N}, d={d}, float32, {case}"
        res = tiled_call(sub, Q, K, V, Br, Bc, what, label, rng.seed, record=True)
        with answer_must_be_right("was recorded", ("tiled_attention.max_in_last_block",)):
            assert_close(res.value, reference.attention(Q, K, V), what=what,
                         input_dtype="float32", terms=N, case=label, seed=rng.seed)
        one_pass_over_keys(res, what, label, rng.seed)


@pytest.mark.check("tiled_attention.large_scores")
def test_large_scores(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    # float32 exp overflows above 88.7, float64 above 709.8. Integer Q and K with d = 64 make
    # every score an exact multiple of 1/8 (scale = 1/8), so float32 loses nothing to rounding
    # the scores and the usual tolerance holds at scores in the hundreds.
    N, d, Br, Bc = 600, 64, 64, 48   # float64: N x N is 2x what the memory gate allows
    hint = ("Subtract the max before exp: the running max m_new in tiled_attention and each "
            "row's max in naive_attention; p = exp(s - m), never exp(s).")
    for dtype, spread, offset in (("float32", 16, 64), ("float64", 64, 128)):
        # (a) spread: entries in [-spread, spread] give scores with a standard deviation of
        # spread * (spread + 1) / 3 (~90 in float32, ~1400 in float64): row maxima ~250, ~4000
        Q, K = (rng.integers(-spread, spread + 1, (N, d)).astype(dtype) for _ in range(2))
        V = randn(rng, (N, d), dtype)
        inputs = [(Q, K, V, f"integer Q, K in [-{spread}, {spread}]")]
        # (b) shifted: every score near offset^2 / 8 (512 in float32, 2048 in float64) with a
        # spread of ~2, so each row still averages many values
        Q, K = (rng.integers(-2, 3, (N, d)).astype(dtype) for _ in range(2))
        Q[:, 0] = K[:, 0] = offset
        inputs.append((Q, K, V, f"every score near {offset * offset // 8}"))
        for Q, K, V, case in inputs:
            for fn in (check_tiled, check_naive):
                with cases.case(f"{NAMES[fn]}, N={N}, d={d}, {dtype}, {case}",
                                seed=rng.seed):
                    try:
                        fn(sub, Q, K, V, *((Br, Bc) if fn is check_tiled else ()), case, rng.seed)
                    except CheckFailed as e:
                        if e.follows is not None:   # the memory gate's failure, as it is
                            raise
                        raise CheckFailed(str(e), hint=hint if _blew_up(e) else e.hint or OFF_BUT_FINITE) from None
    cases.finish()


@pytest.mark.check("tiled_attention.negative_scores")
def test_negative_scores(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    # Every score of row i is near -o_i: Q[i, 0] = sqrt(d) * o_i against K[:, 0] = -1, the other
    # coordinates in {-1, 0, 1} (spread ~0.66). With o_i from 22 to 140 in float32 (exp
    # underflows below -103) and from 700 to 1100 in float64 (below -745), exp(s - 0) is 0 or
    # subnormal in many rows: a running max that starts at 0, or no max at all, gives l = 0
    # and NaN there. exp(s - m) with the row's own max is 1 at the max, whatever the scores.
    N, d, Br, Bc = 513, 64, 32, 48   # float64: N x N is 1.7x what the memory gate allows
    hints = {check_tiled: "Start the running max at -inf (m = np.full(br, -np.inf)), not at 0: when "
                     "every score is far below 0, exp(s - 0) underflows to 0, l stays 0 and "
                     "acc / l is NaN.",
             check_naive: "Safe softmax: subtract each row's own max before exp; without it, scores "
                     "far below 0 underflow to 0 and the row sum is 0."}
    for dtype, low, high in (("float32", 22, 140), ("float64", 700, 1100)):
        Q, K = (rng.integers(-1, 2, (N, d)).astype(np.float64) for _ in range(2))
        Q[:, 0] = np.sqrt(d) * rng.integers(low, high + 1, N)
        K[:, 0] = -1.0
        Q, K, V = Q.astype(dtype), K.astype(dtype), randn(rng, (N, d), dtype)
        case = f"every score of each row between -{high} and -{low}"
        for fn in (check_tiled, check_naive):
            with cases.case(f"{NAMES[fn]}, N={N}, d={d}, {dtype}, {case}",
                            seed=rng.seed):
                try:
                    fn(sub, Q, K, V, *((Br, Bc) if fn is check_tiled else ()), case, rng.seed)
                except CheckFailed as e:
                    if e.follows is not None:   # the memory gate's failure, as it is
                        raise
                    raise CheckFailed(str(e), hint=hints[fn] if _blew_up(e) else e.hint or OFF_BUT_FINITE) from None
    cases.finish()

