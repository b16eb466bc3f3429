"""Hidden check for flash_backward: shapes and block sizes the public checks do not use (N = 1, blocks larger than N, BLOCK_M = 64 over BLOCK_N = 16; bfloat16 is for the gpu layer:
the interpreter computes it wrongly, the core solution included), causal and not, each
shape twice with fresh values (an answer kept between calls or keyed on the public shapes fails
here), computed by the kernels, every input and the NaN behind it unchanged after the calls."""

from __future__ import annotations

import pytest

from grader.exercises.flash_backward.judging import check_backward, check_forward
from grader.exercises.flash_backward.reference import qkv
from grader.judge.answers.compare import CheckFailed
from grader.judge.answers.cases import Cases
from grader.judge.answers.inputs import randn
from hidden_tests.common import assert_guards_untouched, assert_untouched

# (B, H, N, D), dtype, causal, blocks
CASES = [((2, 1, 1, 16), "float16", True, dict(BLOCK_M=16, BLOCK_N=16)),
         ((1, 1, 20, 16), "float16", True, dict(BLOCK_M=32, BLOCK_N=64)),
         ((1, 2, 29, 16), "float32", False, dict(BLOCK_M=16, BLOCK_N=16)),
         ((1, 1, 70, 32), "float16", True, dict(BLOCK_M=64, BLOCK_N=16))]
READ_BACK = {"return_args": True}


@pytest.mark.check("flash_backward.hidden_shapes")
def test_hidden_shapes(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for shape, dtype, causal, blocks in CASES:
        for call in (1, 2):
            q, k, v = qkv(rng, shape, dtype)
            do = randn(rng, shape, dtype)
            case = f"call {call} of 2 with this shape"
            with cases.case(f"{shape}, {dtype}, causal={causal}, {blocks}, {case}", seed=rng.seed):
                try:
                    what = f"flash_fwd(q, k, v, causal={causal}) ({shape}, {dtype}, {case})"
                    extras = check_forward(sub, q, k, v, dtype, causal, blocks, rng.seed, case,
                                           opts=READ_BACK)
                    assert_untouched([q, k, v], extras.get("args_after", []), ["q", "k", "v"],
                                     what, rng.seed)
                    assert_guards_untouched(extras.get("guards_after", []), ["q", "k", "v"],
                                            what, rng.seed)
                    extras, o, L = check_backward(sub, q, k, v, do, dtype, causal, blocks,
                                                  rng.seed, case, opts=READ_BACK)
                    names = ["q", "k", "v", "o", "lse", "do"]
                    what = f"flash_bwd(q, k, v, o, lse, do, causal={causal}) ({shape}, {dtype}, {case})"
                    assert_untouched([q, k, v, o, L, do], extras.get("args_after", []), names,
                                     what, rng.seed)
                    assert_guards_untouched(extras.get("guards_after", []), names, what, rng.seed)
                except CheckFailed as e:
                    if call == 2:
                        raise CheckFailed(str(e), hint="The first call with this shape was right "
                                          "and the second, with fresh values, was not: is "
                                          "something kept between calls?") from None
                    raise
    cases.finish()
