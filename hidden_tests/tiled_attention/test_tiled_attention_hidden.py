"""Hidden checks for tiled_attention: N, d, Br and Bc the public checks do not use (block sizes
that are not powers of two, Br = 1), each shape twice with fresh values (an answer hard-coded
for the public shapes, or cached by shape or call count, fails here), and Q, K, V unchanged."""

from __future__ import annotations

import pytest

from grader.exercises.tiled_attention.judging import tiled_call
from grader.exercises.tiled_attention.reference import qkv
from grader.judge.answers import reference
from grader.judge.answers.compare import CheckFailed, answer_must_be_right, assert_close
from grader.judge.answers.cases import Cases
from hidden_tests.common import assert_untouched, second_call

# (N, d, Br, Bc)
# (the last: N x N far above the tiles, so an untiled call trips the memory gate, tiled_call)
CASES = [(2, 16, 1, 3), (65, 32, 16, 48), (130, 96, 128, 24), (257, 16, 40, 100),
         (1000, 16, 24, 40)]


@pytest.mark.check("tiled_attention.hidden_shapes")
def test_hidden_shapes(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for dtype in ("float32", "float64"):
        for N, d, Br, Bc in CASES:
            for call in (1, 2):
                Q, K, V = qkv(rng, N, d, dtype)
                expected = reference.attention(Q, K, V)
                case = f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}, call {call} of 2 with this shape"
                def judge(s, Q=Q, K=K, V=V, N=N, Br=Br, Bc=Bc, case=case, dtype=dtype,
                          expected=expected):
                    out = tiled_call(s, Q, K, V, Br, Bc,
                                     f"tiled_attention(Q, K, V, Br={Br}, Bc={Bc})", case, rng.seed)
                    assert_close(out, expected, what=f"tiled_attention(Q, K, V, Br={Br}, Bc={Bc})",
                                 input_dtype=dtype, terms=N, case=case, seed=rng.seed)
                    assert_close(s.naive_attention(Q, K, V), expected,
                                 what="naive_attention(Q, K, V)", input_dtype=dtype, terms=N,
                                 case=case, seed=rng.seed)
                with cases.case(case, seed=rng.seed):
                    try:
                        judge(sub)
                    except CheckFailed as e:
                        raise second_call(e, call, sub, judge) from None
    cases.finish()


@pytest.mark.check("tiled_attention.inputs_untouched")
def test_inputs_untouched(student, rng):
    sub = student()
    # N = 600: the N x N scores are far above the tiles, so the memory gate (tiled_call) sees an
    # untiled tiled_attention
    for fn, kwargs in (("tiled_attention", {"Br": 32, "Bc": 48}), ("naive_attention", {})):
        Q, K, V = qkv(rng, 600, 32, "float32")
        what = f"{fn}(Q, K, V)"
        if fn == "tiled_attention":
            r = tiled_call(sub, Q, K, V, 32, 48, what, "N=600, d=32, float32", rng.seed,
                           opts={"return_args": True})
        else:
            r = sub.call(fn, Q, K, V, **kwargs, opts={"return_args": True})
        assert_untouched([Q, K, V], r.extras.get("args_after", []), ["Q", "K", "V"], what, rng.seed)
        # the point needs a right answer too; a wrong one is explained by the other checks
        with answer_must_be_right("left Q, K and V unchanged", ()):
            assert_close(r.value, reference.attention(Q, K, V), what=what, input_dtype="float32",
                         terms=600, case="N=600, d=32", seed=rng.seed)
