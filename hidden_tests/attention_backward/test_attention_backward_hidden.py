"""Hidden checks for attention_backward: N, d, Br and Bc the public checks do not use (Br = 1,
blocks larger than N, block sizes that are not powers of two), causal and not, each shape twice
with fresh values (an answer kept between calls or keyed on the public shapes fails here), and
Q, K, V, O, L, dO unchanged after the backward."""

from __future__ import annotations

import pytest

from grader.exercises.attention_backward.judging import check_backward, check_forward
from grader.exercises.attention_backward.reference import forward_reference, qkv
from grader.judge.answers.compare import CheckFailed, answer_must_be_right
from grader.judge.answers.cases import Cases
from grader.judge.answers.inputs import round_to
from hidden_tests.common import assert_untouched, second_call

# (N, d, Br, Bc, causal)
CASES = [(2, 16, 1, 3, True), (41, 48, 40, 100, True), (66, 32, 9, 21, False),
         (95, 16, 30, 7, True)]


@pytest.mark.check("attention_backward.hidden_shapes")
def test_hidden_shapes(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for dtype in ("float32", "float64"):
        for N, d, Br, Bc, causal in CASES:
            for call in (1, 2):
                Q, K, V, dO = qkv(rng, N, d, dtype, 4)
                case = (f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}, causal={causal}, call {call} "
                        f"of 2 with this shape")
                def judge(s, Q=Q, K=K, V=V, dO=dO, N=N, Br=Br, Bc=Bc, causal=causal, case=case):
                    check_forward(s, Q, K, V, Br, Bc, causal, case, rng.seed)
                    check_backward(s, Q, K, V, dO, Br, Bc, causal, case, rng.seed)
                with cases.case(case, seed=rng.seed):
                    try:
                        judge(sub)
                    except CheckFailed as e:
                        raise second_call(e, call, sub, judge) from None
    cases.finish()


@pytest.mark.check("attention_backward.inputs_untouched")
def test_inputs_untouched(student, rng):
    sub = student()
    N, d, Br, Bc = 90, 32, 16, 24
    Q, K, V, dO = qkv(rng, N, d, "float32", 4)
    O_ref, L = forward_reference(Q, K, V, True)
    O = round_to(O_ref, "float32")
    what = f"tiled_backward(Q, K, V, O, L, dO, Br={Br}, Bc={Bc}, causal=True)"
    r = sub.call("tiled_backward", Q, K, V, O, L, dO, Br, Bc, causal=True,
                 opts={"return_args": True})
    assert_untouched([Q, K, V, O, L, dO], r.extras.get("args_after", []),
                     ["Q", "K", "V", "O", "L", "dO"], what, rng.seed)
    r = sub.call("tiled_attention_lse", Q, K, V, Br, Bc, causal=True, opts={"return_args": True})
    assert_untouched([Q, K, V], r.extras.get("args_after", []), ["Q", "K", "V"],
                     f"tiled_attention_lse(Q, K, V, Br={Br}, Bc={Bc}, causal=True)", rng.seed)
    # the point needs the right answers too; a wrong one is explained by the public checks
    with answer_must_be_right("left its inputs unchanged", ()):
        check_backward(sub, Q, K, V, dO, Br, Bc, True, "causal", rng.seed)
        check_forward(sub, Q, K, V, Br, Bc, True, "causal", rng.seed)
