"""interp checks for exercises/softmax_triton.py (lesson: "Writing a kernel: Triton", Build It
softmax_triton.py): values on contiguous float16 rows (matches_float64), float32 input,
row-strided input.

The kernel runs under Triton's interpreter on CPU tensors (mode "interp"), through the kernel-use
gate, with a block of NaN behind every input (judging.py); the bounds records of each call are
the adversarial checks' business (masked_accesses, test_adversarial.py), except where a store
past the output explains a strided failure. Shapes stay small: the interpreter is slow.
"""

from __future__ import annotations

import pytest

from grader.exercises.softmax_triton.judging import call_softmax, softmax_case
from grader.judge.answers import reference
from grader.judge.answers.cases import run_cases
from grader.judge.answers.compare import CheckFailed, assert_close
from grader.judge.answers.inputs import round_to

# (n_rows, n_cols): 781 and 1000 are not powers of two, 130 leaves half of its 256-lane block
# padded, 1 is a block of one lane, 1024 fills its block exactly
SHAPES = ((5, 781), (4, 130), (3, 1), (3, 1024), (2, 1000))


def shifted(rng, shape, dtype, scale):
    """randn * scale + shift, with every row's max at 20 or more: softmax does not change with
    the shift, and padded lanes loaded as 0 instead of -inf (all_negative_rows' idea) weigh
    exp(0 - max) < 2e-9 each, far below the tolerance, so they do not show here."""
    x = rng.standard_normal(shape) * scale
    return round_to(x + (20.0 - x.max(axis=1, keepdims=True)).clip(0, None), dtype)


@pytest.mark.check("softmax_triton.matches_float64")
def test_matches_float64(student, rng, credit):
    sub = student()
    cases = []
    for n_rows, n_cols in SHAPES:
        scale = float(rng.uniform(1, 4))
        x = shifted(rng, (n_rows, n_cols), "float16", scale)
        cases.append(softmax_case(sub, x, "float16", f"float16 ({n_rows}, {n_cols}), randn * {scale:.2f} "
                           f"+ shift", rng.seed))
    run_cases(credit, cases)


@pytest.mark.check("softmax_triton.float32_input")
def test_float32_input(student, rng, credit):
    sub = student()
    cases = []
    for n_rows, n_cols in ((5, 781), (3, 1024), (4, 130)):
        x = shifted(rng, (n_rows, n_cols), "float32", float(rng.uniform(1, 4)))
        cases.append(softmax_case(sub, x, "float32", f"float32 ({n_rows}, {n_cols})", rng.seed))
    run_cases(credit, cases)


@pytest.mark.check("softmax_triton.strided_rows")
def test_strided_rows(student, rng, credit):
    sub = student()
    # a column slice x[:, :500] of a (6, 781) tensor: its row stride is 781, not 500, while the
    # output the wrapper allocates is contiguous (row stride 500)
    x = shifted(rng, (6, 500), "float16", 2.0)
    case = "float16 x[:, :500] of a (6, 781) tensor: x.stride(0) = 781, the output's is 500"
    # through run_cases: an exception (an assert on contiguous input) names this strided case
    run_cases(credit, [(f"{case} [seed {rng.seed}]", lambda: _strided(sub, x, case, rng.seed))])


def _strided(sub, x, case, seed):
    r = call_softmax(sub, x, "float16", pad_cols=281)
    stores = [o for o in r.extras.get("out_of_bounds", []) if o["access"] == "tl.store"]
    try:
        assert_close(r.value, reference.softmax(x, axis=1), what="softmax(x)", dtype="float16",
                     case=case, seed=seed)
    except CheckFailed as e:
        if stores:
            raise CheckFailed(f"{e}. Your stores went past the end of the output "
                              f"({stores[0]['line']}): the rows of out were addressed with x's "
                              f"row stride.", hint=(
                "The output is a new contiguous tensor: its row stride is out.stride(0) = "
                "n_cols, not x.stride(0). Pass the output's own stride to the kernel for the "
                "store, and x.stride(0) for the load.")) from None
        raise CheckFailed(str(e), hint=(
            "x is a column slice here: row r starts at r * x.stride(0), not r * n_cols. Pass "
            "x.stride(0) to the kernel for the load, and the output's own stride for the "
            "store.")) from None
