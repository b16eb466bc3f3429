"""Hidden checks for online_softmax: lengths, scales and dtypes the public checks do not use,
each shape twice with fresh values (an answer hard-coded for the public lengths, or cached by
shape or call count, fails here), the first of the two shifted so that exp of its largest value
overflows, and the input unchanged after every call."""

from __future__ import annotations

import numpy as np
import pytest

from grader.exercises.online_softmax.judging import assert_state
from grader.judge.answers import reference
from grader.judge.answers.compare import CheckFailed, answer_must_be_right, assert_close, state_rtol
from grader.judge.answers.cases import Cases
from grader.judge.answers.inputs import randn, round_to
from hidden_tests.common import assert_untouched, second_call

LENGTHS = (2, 333, 2049, 5003)
FUNCTIONS = ("softmax_safe", "softmax_online")
ANSWER_CHECKS = ("online_softmax.safe_matches_float64", "online_softmax.online_max_sum",
                 "online_softmax.online_matches_float64")


def _exp_limit(dtype: str) -> float:
    """The largest x whose exp is finite in `dtype`: 88.7 in float32, 709.8 in float64."""
    return float(np.log(np.finfo(dtype).max))


def _overflowing_shift(rng, x, dtype: str) -> float:
    """A shift that puts the row's largest value past exp's limit in `dtype`: softmax does not
    change (it is shift-invariant), an unshifted exp overflows every time. Drawn scales alone
    overflowed float32 in some grades only, so a missing max subtraction lost this check's
    points in one grade and kept them in the next."""
    return float(np.ceil(_exp_limit(dtype) - x.max() + rng.uniform(1.0, 20.0)))


@pytest.mark.check("online_softmax.hidden_shapes")
def test_hidden_shapes(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for dtype in ("float64", "float32"):
        for n in LENGTHS:
            for call in (1, 2):
                scale = float(rng.uniform(0.5, 30))
                x = randn(rng, n, dtype, scale)
                shift = _overflowing_shift(rng, x, dtype) if call == 1 else 0.0
                x = round_to(x + shift, dtype)
                case = (f"n={n}, {dtype}, randn * {scale:.2f}"
                        + (f" + {shift:.2f} (exp overflows {dtype} above {_exp_limit(dtype):.1f})"
                           if shift else "")
                        + f", call {call} of 2 with this shape")
                def judge(s, x=x, case=case, dtype=dtype, n=n):
                    for fn in FUNCTIONS:
                        assert_close(getattr(s, fn)(x), reference.softmax(x), what=f"{fn}(x)",
                                     input_dtype=dtype, terms=n, case=case, seed=rng.seed)
                    assert_state(s.online_max_sum(x), reference.max_sum(x),
                                 f"online_max_sum(x) ({case})", rng.seed, state_rtol(dtype, n), x)
                with cases.case(case, seed=rng.seed):
                    try:
                        judge(sub)
                    except CheckFailed as e:
                        raise second_call(e, call, sub, judge) from None
    cases.finish()


@pytest.mark.check("online_softmax.inputs_untouched")
def test_inputs_untouched(student, rng):
    sub = student()
    for fn in (*FUNCTIONS, "online_max_sum"):
        x = randn(rng, 1000, "float64", 10)
        r = sub.call(fn, x, opts={"return_args": True})
        assert_untouched([x], r.extras.get("args_after", []), ["x"], f"{fn}(x)", rng.seed)
        # the point needs a right answer too; a wrong one is explained by the other checks
        with answer_must_be_right("left x unchanged", ANSWER_CHECKS):
            if fn == "online_max_sum":
                assert_state(r.value, reference.max_sum(x), f"{fn}(x)", rng.seed,
                             state_rtol("float64", x.size), x)
            else:
                assert_close(r.value, reference.softmax(x), what=f"{fn}(x)", input_dtype="float64",
                             terms=x.size, seed=rng.seed)
