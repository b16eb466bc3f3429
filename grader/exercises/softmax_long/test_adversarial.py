"""adversarial checks for exercises/softmax_long.py (lesson: "Softmax, the safe way", "Online
softmax", Break It 1): masks, the rescale when the max moves, blocks of -inf, overflow without
the max, rows far below 0, kernel use.

The kernels run under Triton's interpreter on CPU tensors (mode "interp"), with BLOCK (the most
columns a program holds) passed small so that rows of a hundred columns are long rows. Every
input is drawn fresh from `rng`, rounded here to the dtype the kernel sees, and followed in
memory by a block of NaN. Every call goes through the kernel-use gate (grader.fixtures.ProvingSubmission),
and every tl.load/tl.store is checked lane by lane (grader/worker/bounds.py): only
`masked_accesses` judges those records. References are float64 (judging.py). Shapes stay tiny:
the interpreter is slow.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.exercises.softmax_long.judging import (call_softmax, describe, max_in_first_block,
                                                   past_row_weightless, softmax_case)
from grader.exercises.softmax_long.rows import ANSWER_IDEAS
from grader.judge.answers import reference
from grader.judge.answers.cases import run_cases
from grader.judge.answers.compare import assert_right_answer, assert_shape
from grader.judge.answers.inputs import randn, round_to
from grader.judge.evidence.kernel_use import assert_in_bounds, assert_kernel_wrote

LAUNCH = "your Triton kernels"
MASK_HINTS = {
    "tl.load": "Mask every load: in a column block starting at `start`, mask = start + cols < "
               "n_cols (the last block is short), and rows < n_rows when a program holds "
               "several rows. Without it the last row reads past the end of x.",
    "tl.store": "Mask every store the same way as its load (start + cols < n_cols, rows < "
                "n_rows): without it the last row writes past the end of the output.",
}


@pytest.mark.check("softmax_long.uses_kernel")
def test_uses_kernel(student, rng):
    # The gate (grader.fixtures.ProvingSubmission) records torch ops below the dispatcher (torch.softmax
    # shows as _softmax); the audit refuses NumPy, threads and processes. The answer must be
    # right too: a kernel that computes nothing (a stub with its raise deleted) earns nothing.
    sub = student()
    x = round_to(past_row_weightless(randn(rng, (3, 100), "float16", 2)), "float16")
    case = describe(x, "float16", 32)
    r = call_softmax(sub, x, "float16", block=32)
    assert_kernel_wrote(r.extras, r.value, x.size, f"softmax(x) ({case})", LAUNCH)
    assert_shape(r.value, x.shape, what="softmax(x)", dtype="float16")
    assert_right_answer(r.value, reference.softmax(x), prop="launched the kernels",
                        follows=(*ANSWER_IDEAS, "softmax_long.matches_float64",
                                 "softmax_long.masked_accesses"), what="softmax(x)", dtype="float16", case=case,
                        seed=rng.seed)


@pytest.mark.check("softmax_long.masked_accesses")
def test_masked_accesses(student, rng):
    sub = student()
    # a long row whose last block has 6 of 32 columns; 5 short rows in tiles of several rows
    for shape, block in (((2, 70), 32), ((5, 3), 32)):
        x = round_to(max_in_first_block(rng.standard_normal(shape) * 2.0, block), "float16")
        case = describe(x, "float16", block)
        r = call_softmax(sub, x, "float16", block=block)
        assert_in_bounds(r, ["x"], f"softmax(x) ({case}) [seed {rng.seed}]", MASK_HINTS)
        # staying in bounds by storing nothing (a stub) earns nothing
        assert_kernel_wrote(r.extras, r.value, x.size, f"softmax(x) ({case})", LAUNCH)
        assert_right_answer(r.value, reference.softmax(x), prop="stayed in bounds",
                            follows=ANSWER_IDEAS, what="softmax(x)", dtype="float16", case=case,
                            seed=rng.seed)


@pytest.mark.check("softmax_long.max_in_last_block")
def test_max_in_last_block(student, rng, credit):
    sub = student()
    n_rows, n_cols, block = 4, 150, 32
    x = rng.standard_normal((n_rows, n_cols))
    # row 0: one spike in the last (short) block; row 1: the max rises block after block;
    # row 2: the very last column is the max; row 3: the spike in the second block, so the max
    # moves once and then stays. Each moves the max by 6 or more: a sum not rescaled is off by
    # a factor near e^6.
    x[0, rng.integers(128, n_cols)] = 9.0
    x[1] += np.arange(n_cols) // block * 2.5
    x[2, -1] = 10.0
    x[3, rng.integers(32, 64)] = 8.0
    x = round_to(x, "float16")
    run_cases(credit, [softmax_case(sub, x, "float16", rng.seed, block,
                                    "the max moves into a later block")])


@pytest.mark.check("softmax_long.neg_inf_blocks")
def test_neg_inf_blocks(student, rng, credit):
    sub = student()
    x = rng.standard_normal((3, 100)) * 2
    x[0, :32] = -np.inf                      # the whole first block of 32
    x[1, :64] = -np.inf                      # the first two blocks
    x[1, 64 + rng.choice(36, 5, replace=False)] = -np.inf
    x[2, rng.choice(100, 20, replace=False)] = -np.inf   # scattered, the row's last column too
    x[2, -1] = -np.inf
    x[2, 0] = -np.inf        # what a pass reading one lane past row 1 finds weighs nothing
    x = round_to(max_in_first_block(x, 32), "float16")
    run_cases(credit, [softmax_case(sub, x, "float16", rng.seed, 32,
                                    "-inf entries, whole blocks of -inf")])


@pytest.mark.check("softmax_long.fp16_large_values")
def test_fp16_large_values(student, rng, credit):
    sub = student()
    cases = []
    # Break It 1: tl.exp computes in float32, which overflows above 88.7; randn * 40 reaches
    # past 100 in a row of a hundred, and a few entries are set between 100 and 200 to be sure
    for shape, block in (((3, 100), 32), ((6, 20), 32)):
        x = rng.standard_normal(shape) * 40
        x[np.arange(shape[0]), rng.integers(0, shape[1], shape[0])] = rng.uniform(100, 200, shape[0])
        x = round_to(x, "float16")
        cases.append(softmax_case(sub, x, "float16", rng.seed, block,
                                  f"randn * 40, up to {x.max():.0f}"))
    run_cases(credit, cases)


@pytest.mark.check("softmax_long.all_negative_rows")
def test_all_negative_rows(student, rng, credit):
    sub = student()
    cases = []
    # values near -200: exp(x) underflows float32 (below -103), so only exp(x - m) with the true
    # max works; ragged widths leave padded lanes in the last block (long) and the tile (short);
    # each row's max in its first block, so a sum not rescaled (max_in_last_block's idea) does
    # not show here in some draws and not in others, nor a mask off by one (masked_accesses')
    for shape, block in (((3, 75), 32), ((5, 21), 32)):
        x = past_row_weightless(rng.standard_normal(shape) * 3 - 200)
        x = round_to(max_in_first_block(x, block), "float16")
        cases.append(softmax_case(sub, x, "float16", rng.seed, block, "randn * 3 - 200"))
    run_cases(credit, cases)
