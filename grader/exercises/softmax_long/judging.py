"""softmax_long's calls and comparisons, shared by its adversarial and interp checks and its
hidden checks (hidden_tests/softmax_long/).

Every call goes through the kernel-use gate (grader.fixtures.ProvingSubmission) with new tensors poisoned
with NaN and a guard band of NaN behind x; the reference is float64, computed here from the
exact input values. A check passes BLOCK (the most columns a program may hold) so that rows of a
few hundred columns take the long-row path under the interpreter."""

from __future__ import annotations

import numpy as np

from grader.exercises.softmax_long import mistakes
from grader.judge.answers import reference
from grader.judge.answers.compare import CheckFailed, assert_close
from grader.judge.answers.inputs import tensor


def guard_of(n_cols: int) -> int:
    """NaN elements behind x: a whole tile of the last row, read past its end, lands in them."""
    return 1 << max(n_cols - 1, 0).bit_length()


def max_in_first_block(x: np.ndarray, block: int) -> np.ndarray:
    """x with every row's later finite entries capped 1 below the max of its first block that
    holds a finite one: the running max never moves after that block, so a sum that is not
    rescaled when it moves (max_in_last_block's idea) cannot show in a check of another idea,
    whatever the draw."""
    x = np.array(x, dtype=np.float64)
    for row in x:
        finite = np.flatnonzero(np.isfinite(row))
        if finite.size == 0:
            continue
        start = finite[0] // block * block
        top = row[start:start + block][np.isfinite(row[start:start + block])].max()
        later = row[start + block:]
        np.minimum(later, top - 1.0, out=later, where=np.isfinite(later))
    return x


def past_row_weightless(x: np.ndarray) -> np.ndarray:
    """x with each row's first entry (after the first row) 20 or more below the max of the row
    before it: a pass that reads one lane past the end of its row (a mask off by one,
    masked_accesses' idea) adds less than 2.1e-9 of a term to that row's sum, so it does not
    show in a check of another idea, in any draw (it did in some and not in others)."""
    x = np.array(x, dtype=np.float64)
    for r in range(1, x.shape[0]):
        before = x[r - 1][np.isfinite(x[r - 1])]
        if before.size and np.isfinite(x[r, 0]):
            x[r, 0] = min(x[r, 0], before.max() - 20.0)
    return x


def call_softmax(sub, x: np.ndarray, dtype: str, block: int | None = None, pad_cols: int = 0):
    """softmax(x, BLOCK=block) on x (exact values in `dtype`) with NaN behind it, through the gate;
    new tensors in the wrapper are NaN-filled (an element never stored stays NaN). block None:
    the student's own choice."""
    kwargs = {} if block is None else {"BLOCK": block}
    return sub.call("softmax", tensor(x, dtype, guard=guard_of(x.shape[1]), pad_cols=pad_cols),
                    opts={"poison_empty": True}, **kwargs)


def describe(x: np.ndarray, dtype: str, block: int | None, what: str = "") -> str:
    n_rows, n_cols = x.shape
    path = ("" if block is None else f", BLOCK={block}: " +
            ("one tile per row" if n_cols <= block else f"{-(-n_cols // block)} column blocks"))
    return f"{dtype} ({n_rows}, {n_cols}){path}" + (f", {what}" if what else "")


def run_softmax(sub, x: np.ndarray, dtype: str, case: str, seed: int, block: int | None = None,
                pad_cols: int = 0):
    """Compare every element of softmax(x) with the float64 reference; a failure whose output
    shows a known mistake says which (mistakes.hint), and goes under the check aimed at it."""
    got = call_softmax(sub, x, dtype, block, pad_cols).value
    expected = reference.softmax(x, axis=1)
    try:
        assert_close(got, expected, what="softmax(x)", dtype=dtype, case=case, seed=seed,
                     grid=(None, block))   # a picture of a failure: one band per column block
    except CheckFailed as e:
        said, follows = mistakes.hint(got, x, expected, dtype=dtype, block=block,
                                      contiguous=not pad_cols)
        if not said:
            raise
        raise CheckFailed(str(e), hint=said, follows=follows) from None


def softmax_case(sub, x, dtype, seed, block=None, what="", **kw):
    """A (name, run) case for run_cases: run_softmax on x, its shape, BLOCK and seed in its name."""
    case = describe(x, dtype, block, what)
    return (f"{case} [seed {seed}]", lambda: run_softmax(sub, x, dtype, case, seed, block, **kw))
