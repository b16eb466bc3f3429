"""adversarial checks for exercises/online_softmax.py (lesson: "Softmax, the safe way", "Online
softmax"): the empty row, overflow, one element, and float16 and float32 input past exp's overflow.

Inputs, references and the tolerance policy are those of the cpu checks (test_cpu.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from grader import errors
from grader.exercises.online_softmax.judging import assert_state, state_of
from grader.judge.answers import reference
from grader.judge.answers.compare import CheckFailed, assert_close, state_rtol
from grader.judge.answers.cases import Cases
from grader.judge.answers.inputs import randn


@pytest.mark.check("online_softmax.empty_input")
def test_empty_input(student, rng):
    sub = student()
    for dtype in ("float64", "float32"):
        x = np.zeros(0, dtype=dtype)
        what = f"online_max_sum(x) of an empty {dtype} x"
        try:
            value = sub.online_max_sum(x)
        except errors.StudentRaised as e:
            raise CheckFailed(f"{what}: expected the empty state (-inf, 0.0), but the call raised "
                              f"({e})", hint="Start from the empty state m = -inf, l = 0.0, not "
                              "from x[0]: it is what n = 0 returns.") from None
        m, l = state_of(value, what)
        if not (m == float("-inf") and l == 0.0):
            raise CheckFailed(
                f"{what}: expected the empty state (-inf, 0.0), got ({m!r}, {l!r})",
                hint="Start from the empty state m = -inf, l = 0.0 (not from x[0]): it is what "
                     "n = 0 returns, and exp(-inf) = 0 makes the first element start l at 1.")


@pytest.mark.check("online_softmax.no_overflow")
def test_no_overflow(student, rng):
    sub = student()
    shift = float(rng.uniform(0, 5))
    # this check's idea is overflow: a finite wrong answer is another's (rows.py, evidence)
    for base in (1000.0, -1000.0):
        x = np.array([base, base + 1, base + 2]) + shift
        expected = reference.softmax(x)
        for fn in ("softmax_safe", "softmax_online"):
            assert_close(getattr(sub, fn)(x), expected, what=f"{fn}({x.tolist()})",
                         input_dtype="float64", seed=rng.seed)
        assert_state(sub.online_max_sum(x), reference.max_sum(x), f"online_max_sum({x.tolist()})",
                     rng.seed, x=x)


@pytest.mark.check("online_softmax.single_element")
def test_single_element(student, rng):
    sub = student()
    one = randn(rng, 1, "float64", 100)
    for fn in ("softmax_safe", "softmax_online"):
        assert_close(getattr(sub, fn)(one), np.ones(1), what=f"{fn} of one element {one.tolist()}",
                     input_dtype="float64", seed=rng.seed)
    assert_state(sub.online_max_sum(one), (float(one[0]), 1.0), "online_max_sum of one element",
                 rng.seed, x=one)


@pytest.mark.check("online_softmax.low_precision_input")
def test_low_precision_input(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    # float16 scores well past exp's overflow at 11.09, and float32 ones past 88.7; the output
    # may be any float at least as precise as the input
    for dtype, n, scale in (("float16", 781, 20), ("float32", 1000, 60)):
        x = randn(rng, n, dtype, scale)
        expected = reference.softmax(x)
        case = f"n={n}, {dtype}, randn * {scale}"
        for fn in ("softmax_safe", "softmax_online"):
            with cases.case(f"{fn}, {case}", seed=rng.seed):
                assert_close(getattr(sub, fn)(x), expected, what=f"{fn}(x)", input_dtype=dtype,
                             terms=n, case=case, seed=rng.seed)
        with cases.case(f"online_max_sum, {case}", seed=rng.seed):
            assert_state(sub.online_max_sum(x), reference.max_sum(x), f"online_max_sum(x) ({case})",
                         rng.seed, state_rtol(dtype, n), x)
    cases.finish()

