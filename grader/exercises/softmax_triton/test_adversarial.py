"""adversarial checks for exercises/softmax_triton.py (lesson: "Writing a kernel: Triton",
Build It softmax_triton.py, Break It 1): masks, Break It 1, the -inf padding, kernel use.

The kernel runs under Triton's interpreter on CPU tensors (mode "interp"). Every input is drawn
fresh from `rng`, rounded here to the dtype the kernel sees, and followed in memory by a block of
NaN. Every call goes through the kernel-use gate (grader.fixtures.ProvingSubmission): a Triton launch and no
computing torch op, or the check fails; and every tl.load/tl.store is checked lane by lane
against the tensors of the call (grader/worker/bounds.py): a lane past the end is switched off
and recorded, and only `masked_accesses` judges those records, so a missing mask fails that
check, deterministically, whatever a later tl.where does with the value. References are float64,
computed here from the exact input values (judging.py). Shapes stay small: the interpreter is
slow.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.exercises.softmax_triton.judging import block_of, call_softmax, run_softmax, softmax_case
from grader.judge.answers import reference
from grader.judge.answers.cases import run_cases
from grader.judge.answers.compare import assert_right_answer, assert_shape
from grader.judge.answers.inputs import randn, round_to
from grader.judge.evidence.kernel_use import assert_in_bounds, assert_kernel_wrote

# the checks whose ideas explain a wrong answer in a property check's call (the first that
# failed leads; compare.assert_right_answer)
ANSWER_CHECKS = ("softmax_triton.matches_float64", "softmax_triton.all_negative_rows",
                 "softmax_triton.fp16_scaled_rows")

MASK_HINTS = {
    "tl.load": "Mask the row's load: tl.load(in_ptr + row * row_stride + cols, mask=cols < "
               "n_cols, other=float('-inf')). Without mask= it reads past the end of the row "
               "(the last row: past the end of x), even when tl.where hides the value later.",
    "tl.store": "Mask the store: tl.store(out_ptr + row * out_row_stride + cols, y, mask=cols < "
                "n_cols). Without it the last row writes past the end of the output.",
}


@pytest.mark.check("softmax_triton.masked_accesses")
def test_masked_accesses(student, rng):
    sub = student()
    # n_cols below the block: each row's tile has padded lanes, and the last row's run past x
    for n_rows, n_cols in ((4, 130), (3, 781), (2, 3)):
        x = randn(rng, (n_rows, n_cols), "float16", 2.0)
        r = call_softmax(sub, x, "float16")
        case = f"softmax(x) (float16 ({n_rows}, {n_cols}), BLOCK {block_of(n_cols)}) [seed {rng.seed}]"
        assert_in_bounds(r, ["x"], case, MASK_HINTS)
        # staying in bounds by storing nothing (a stub), or a uniform row, earns nothing
        assert_kernel_wrote(r.extras, r.value, x.size, case, "softmax_kernel")
        assert_right_answer(r.value, reference.softmax(x), prop="stayed in bounds",
                            follows=ANSWER_CHECKS, what="softmax(x)", dtype="float16",
                            case=f"float16 ({n_rows}, {n_cols})", seed=rng.seed)


@pytest.mark.check("softmax_triton.fp16_scaled_rows")
def test_fp16_scaled_rows(student, rng, credit):
    sub = student()
    cases = []
    for n_rows, n_cols in ((6, 781), (3, 130)):
        x = rng.standard_normal((n_rows, n_cols))
        # Break It 1 says fp16 rows * 20 overflow exp (float16's exp does above 11.09). But
        # tl.exp takes only fp32/fp64, so a Triton kernel exponentiates in float32, which
        # overflows only above 88.7, and randn * 20 over 781 columns tops out near 65. So the
        # later rows also carry a few entries between 4.6 and 6 sigma: times 20 they pass 92,
        # and exp(x) without the max is inf there (then inf / inf = nan).
        for row in range(n_rows // 2, n_rows):
            spikes = rng.choice(n_cols, size=min(3, n_cols), replace=False)
            x[row, spikes] = rng.uniform(4.6, 6.0, size=spikes.size)
        x = round_to(x * 20, "float16")
        case = (f"float16 ({n_rows}, {n_cols}), randn * 20; rows {n_rows // 2} to {n_rows - 1} "
                f"reach {x.max():.0f}")
        cases.append((f"{case} [seed {rng.seed}]",
                       lambda x=x, case=case: run_softmax(sub, x, "float16", case, rng.seed,
                                                          what="softmax(x * 20)")))
    run_cases(credit, cases)


@pytest.mark.check("softmax_triton.all_negative_rows")
def test_all_negative_rows(student, rng, credit):
    sub = student()
    cases = []
    # every value below 0, and n_cols < BLOCK so some lanes of each row are padding
    for n_rows, n_cols in ((4, 781), (3, 130), (5, 3)):
        near = -np.abs(rng.standard_normal((n_rows, n_cols))) - rng.uniform(0.05, 1)
        far = rng.standard_normal((n_rows, n_cols)) * 5 - 50   # like x - 50
        for name, x in (("-|randn| - c", near), ("randn * 5 - 50", far)):
            x = round_to(x, "float16")
            cases.append(softmax_case(sub, x, "float16", f"float16 ({n_rows}, {n_cols}), BLOCK "
                               f"{block_of(n_cols)}, all negative: {name}", rng.seed))
    run_cases(credit, cases)


@pytest.mark.check("softmax_triton.uses_kernel")
def test_uses_kernel(student, rng):
    # The gate (grader.fixtures.ProvingSubmission) records torch ops below the dispatcher, so torch.softmax
    # shows as _softmax and the eager version as max/sub/exp/sum/div; the audit refuses NumPy,
    # threads and processes in this exercise. The answer must also be right: a kernel that
    # computes nothing (a stub with its raise deleted) earns nothing here either.
    sub = student()
    x = randn(rng, (3, 256), "float16", 2)
    r = call_softmax(sub, x, "float16")
    assert_kernel_wrote(r.extras, r.value, x.size, "softmax(x)", "softmax_kernel")
    assert_shape(r.value, x.shape, what="softmax(x)", dtype="float16")
    assert_right_answer(r.value, reference.softmax(x), prop="launched the kernel",
                        follows=ANSWER_CHECKS, what="softmax(x)", dtype="float16",
                        case="float16 (3, 256)", seed=rng.seed)
