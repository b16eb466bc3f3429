"""Hidden checks for softmax_long: other shapes and blocks, each twice with fresh values, every
call traced (a Triton launch, nothing computed by PyTorch around it), with new tensors poisoned
(an output element the kernels never write stays NaN) and the input read back afterwards."""

from __future__ import annotations

import pytest

from grader.exercises.softmax_long.judging import guard_of, max_in_first_block, past_row_weightless
from grader.judge.answers import reference
from grader.judge.answers.cases import run_cases
from grader.judge.answers.compare import assert_close
from grader.judge.answers.inputs import randn, round_to, tensor
from hidden_tests.common import assert_written, kernel_call

# (shape, BLOCK): long rows over blocks of 16 and 64, and short rows with the student's BLOCK
SHAPES = (((3, 45), 16), ((2, 130), 64), ((11, 6), None))


def _softmax(sub, x, dtype, block, case, seed):
    """softmax(x, BLOCK=block) through kernel_call, with a block of NaN behind x."""
    what = f"softmax(x) ({dtype} {x.shape}, BLOCK={block}, {case})"
    kwargs = {} if block is None else {"BLOCK": block}
    arg = tensor(x, dtype, guard=guard_of(x.shape[1]))
    return kernel_call(sub, "softmax", [arg], {"x": x}, what, seed, **kwargs), what


@pytest.mark.check("softmax_long.hidden_shapes")
def test_hidden_shapes(student, rng, credit):
    sub = student()
    cases = []
    for dtype, (shape, block) in zip(("float32", "float16", "bfloat16"), SHAPES):
        for call in (1, 2):
            scale = float(rng.uniform(0.5, 8))
            x = round_to(past_row_weightless(randn(rng, shape, dtype, scale)), dtype)

            def run(x=x, dtype=dtype, block=block, call=call, scale=scale):
                r, what = _softmax(sub, x, dtype, block, f"call {call} of 2 with this shape", rng.seed)
                assert_close(r.value, reference.softmax(x, axis=1), what=what, dtype=dtype,
                             case=f"randn * {scale:.2f}", seed=rng.seed)
            cases.append((f"{dtype} {shape} BLOCK={block} call {call} [seed {rng.seed}]", run))
    run_cases(credit, cases)


@pytest.mark.check("softmax_long.output_written")
def test_output_written(student, rng):
    sub = student()
    for shape, block in (((2, 70), 32), ((9, 3), None)):
        x = round_to(max_in_first_block(past_row_weightless(randn(rng, shape, "float16")),
                                        block or shape[1]), "float16")
        r, what = _softmax(sub, x, "float16", block, "new tensors filled with NaN", rng.seed)
        expected = reference.softmax(x, axis=1)
        assert_written(r.value, expected, what, rng.seed, r.extras)
        assert_close(r.value, expected, what=what, dtype="float16", seed=rng.seed)
