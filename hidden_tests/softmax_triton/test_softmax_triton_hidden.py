"""Hidden checks for softmax_triton: other shapes, each twice with fresh values, every call
traced (a Triton launch, nothing computed by PyTorch around it), with new tensors poisoned
(an output element the kernel never writes stays NaN) and the input read back afterwards."""

from __future__ import annotations

import pytest

from grader.exercises.softmax_triton.judging import block_of
from grader.judge.answers import reference
from grader.judge.answers.compare import assert_close
from grader.judge.answers.inputs import randn, tensor
from grader.judge.answers.cases import run_cases
from hidden_tests.common import assert_written, kernel_call

SHAPES = ((3, 257), (6, 65), (2, 2000), (1, 4096))


def _softmax(sub, x, dtype, case, seed):
    """softmax(x) through kernel_call, with a block of NaN behind x; returns the value."""
    what = f"softmax(x) ({dtype} {x.shape}, {case})"
    arg = tensor(x, dtype, guard=block_of(x.shape[1]))
    return kernel_call(sub, "softmax", [arg], {"x": x}, what, seed), what


@pytest.mark.check("softmax_triton.hidden_shapes")
def test_hidden_shapes(student, rng, credit):
    sub = student()
    cases = []
    for dtype in ("float32", "float16"):
        for shape in SHAPES:
            for call in (1, 2):
                scale = float(rng.uniform(0.5, 8))
                x = randn(rng, shape, dtype, scale)

                def run(x=x, dtype=dtype, call=call, scale=scale):
                    r, what = _softmax(sub, x, dtype, f"call {call} of 2 with this shape", rng.seed)
                    assert_close(r.value, reference.softmax(x, axis=1), what=what, dtype=dtype,
                                 case=f"randn * {scale:.2f}", seed=rng.seed)
                cases.append((f"{dtype} {shape} call {call} [seed {rng.seed}]", run))
    run_cases(credit, cases)


@pytest.mark.check("softmax_triton.output_written")
def test_output_written(student, rng):
    sub = student()
    for shape in ((7, 300), (1, 1), (33, 20)):
        x = randn(rng, shape, "float16")
        r, what = _softmax(sub, x, "float16", "new tensors filled with NaN", rng.seed)
        expected = reference.softmax(x, axis=1)
        assert_written(r.value, expected, what, rng.seed, r.extras)
        assert_close(r.value, expected, what=what, dtype="float16", seed=rng.seed)
