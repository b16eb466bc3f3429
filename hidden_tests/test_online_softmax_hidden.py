"""Hidden checks for online_softmax: lengths, scales and dtypes the public checks do not use,
each shape twice with fresh values (an answer hard-coded for the public lengths, or cached by
shape or call count, fails here), and the input unchanged after every call."""

from __future__ import annotations

import pytest

from grader.judge import reference
from grader.checks.test_online_softmax import assert_state
from grader.judge.compare import assert_close
from grader.judge.inputs import randn
from hidden_tests.common import assert_untouched

LENGTHS = (2, 333, 2049, 5003)
FUNCTIONS = ("softmax_safe", "softmax_online")


@pytest.mark.check("online_softmax.hidden_shapes")
def test_hidden_shapes(student, rng):
    sub = student()
    for dtype in ("float64", "float32"):
        for n in LENGTHS:
            for call in (1, 2):
                scale = float(rng.uniform(0.5, 30))
                x = randn(rng, n, dtype, scale)
                case = f"n={n}, {dtype}, randn * {scale:.2f}, call {call} of 2 with this shape"
                for fn in FUNCTIONS:
                    assert_close(getattr(sub, fn)(x), reference.softmax(x), what=f"{fn}(x)",
                                 dtype=dtype, case=case, seed=rng.seed)
                assert_state(sub.online_max_sum(x), reference.max_sum(x),
                             f"online_max_sum(x) ({case})", rng.seed, rtol=1e-6)


@pytest.mark.check("online_softmax.inputs_untouched")
def test_inputs_untouched(student, rng):
    sub = student()
    for fn in (*FUNCTIONS, "online_max_sum"):
        x = randn(rng, 1000, "float64", 10)
        r = sub.call(fn, x, opts={"return_args": True})
        assert_untouched([x], r.extras.get("args_after", []), ["x"], f"{fn}(x)", rng.seed)
        if fn == "online_max_sum":
            assert_state(r.value, reference.max_sum(x), f"{fn}(x)", rng.seed)
        else:
            assert_close(r.value, reference.softmax(x), what=f"{fn}(x)", dtype="float64",
                         seed=rng.seed)
