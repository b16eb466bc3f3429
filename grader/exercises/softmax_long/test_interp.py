"""interp checks for exercises/softmax_long.py (lesson: "Online softmax", "Writing a kernel:
Triton"): values on long rows at awkward widths (matches_float64), short rows several per
program, float32 rows, row-strided input.

The kernels run under Triton's interpreter on CPU tensors (mode "interp"), through the
kernel-use gate, with a block of NaN behind every input (judging.py); BLOCK is passed small so
that a row of a few hundred columns is a long row. The bounds records of each call are
masked_accesses' business (test_adversarial.py). Shapes stay tiny: the interpreter is slow.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.exercises.softmax_long.judging import past_row_weightless, softmax_case
from grader.judge.answers.cases import run_cases
from grader.judge.answers.inputs import round_to

# (n_rows, n_cols, BLOCK): widths 1 and 2, one column past a block, ragged over 5 blocks (300 =
# 4 * 64 + 44), and an exact multiple of the block
LONG = ((3, 1, 32), (2, 2, 32), (3, 33, 32), (2, 300, 64), (2, 128, 32))


def shifted(rng, shape, dtype, scale):
    """randn * scale with every row's max lifted to 20 or more: softmax does not change with the
    shift, and padded lanes read as 0 (all_negative_rows' idea) weigh exp(0 - max) < 2e-9, far
    below the tolerance, so they do not show here."""
    x = rng.standard_normal(shape) * scale
    return round_to(x + (20.0 - x.max(axis=1, keepdims=True)).clip(0, None), dtype)


@pytest.mark.check("softmax_long.matches_float64")
def test_matches_float64(student, rng, credit):
    sub = student()
    cases = []
    for n_rows, n_cols, block in LONG:
        scale = float(rng.uniform(1, 4))
        x = round_to(past_row_weightless(shifted(rng, (n_rows, n_cols), "float16", scale)),
                     "float16")
        cases.append(softmax_case(sub, x, "float16", rng.seed, block, f"randn * {scale:.2f} + shift"))
    run_cases(credit, cases)


@pytest.mark.check("softmax_long.short_rows")
def test_short_rows(student, rng, credit):
    sub = student()
    cases = []
    # your own BLOCK (None): rows this short are one tile each, several rows per program; 37 and
    # 9 rows leave the last program's tile part empty
    for shape in ((37, 5), (9, 1), (6, 50)):
        x = shifted(rng, shape, "float16", float(rng.uniform(1, 4)))
        cases.append(softmax_case(sub, x, "float16", rng.seed, None, "your own BLOCK"))
    run_cases(credit, cases)


@pytest.mark.check("softmax_long.float32_rows")
def test_float32_rows(student, rng, credit):
    sub = student()
    cases = []
    # one entry per row dominates (p near 0.9, l near 1.1), so a row sum rounded to float16
    # (up to 2^-11 relative) is off by more than float32's tolerance (2e-5) in most rows, and in
    # some of eight almost surely; long rows and short rows
    for shape, block in (((8, 200), 64), ((5, 40), 64)):
        x = rng.standard_normal(shape)
        x[np.arange(shape[0]), rng.integers(0, shape[1], shape[0])] += 8.0
        x = round_to(x, "float32")
        cases.append(softmax_case(sub, x, "float32", rng.seed, block, "one entry dominates"))
    run_cases(credit, cases)


@pytest.mark.check("softmax_long.strided_rows")
def test_strided_rows(student, rng, credit):
    sub = student()
    cases = []
    # x[:, :n] of a tensor pad_cols wider: its row stride is n + pad, the output's is n
    for shape, block, pad in (((3, 100), 32, 30), ((4, 20), 32, 7)):
        x = shifted(rng, shape, "float16", 2.0)
        what = f"x[:, :{shape[1]}] of a ({shape[0]}, {shape[1] + pad}) tensor (row stride {shape[1] + pad})"
        cases.append(softmax_case(sub, x, "float16", rng.seed, block, what, pad_cols=pad))
    run_cases(credit, cases)
