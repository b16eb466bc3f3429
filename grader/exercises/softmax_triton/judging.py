"""softmax_triton's calls and comparisons, shared by its adversarial and interp checks (and
block_of by its gpu checks and its hidden checks, hidden_tests/softmax_triton/).

Every call goes through the kernel-use gate (grader.fixtures.ProvingSubmission) with new tensors poisoned
with NaN and a guard band of NaN behind x; the reference is float64, computed here from the
exact input values."""

from __future__ import annotations

import numpy as np

from grader.exercises.softmax_triton.mistakes import softmax_hint
from grader.judge.answers import reference
from grader.judge.answers.compare import CheckFailed, assert_close
from grader.judge.answers.inputs import tensor


def block_of(n_cols: int) -> int:
    """The tile a one-row-per-program kernel needs: the next power of two >= n_cols."""
    return 1 << max(n_cols - 1, 0).bit_length()


def call_softmax(sub, x: np.ndarray, dtype: str, pad_cols: int = 0):
    """softmax(x) on x (exact values in `dtype`) with a block of NaN behind it, through the gate;
    new tensors in the wrapper are NaN-filled (an element never stored stays NaN)."""
    return sub.call("softmax", tensor(x, dtype, guard=block_of(x.shape[1]), pad_cols=pad_cols),
                    opts={"poison_empty": True})


def run_softmax(sub, x: np.ndarray, dtype: str, case: str, seed: int, what: str = "softmax(x)",
                pad_cols: int = 0):
    """Compare every element of softmax(x) with the float64 reference."""
    got = call_softmax(sub, x, dtype, pad_cols).value
    try:
        assert_close(got, reference.softmax(x, axis=1), what=what, dtype=dtype, case=case, seed=seed)
    except CheckFailed as e:
        # a hint only when the output equals a known mistake's answer (mistakes.py)
        raise CheckFailed(str(e), hint=softmax_hint(got, x, dtype=dtype) or e.hint) from None


def softmax_case(sub, x, dtype, case, seed, **kw):
    """A (name, run) case for run_cases: run_softmax on x, the seed in its name."""
    return (f"{case} [seed {seed}]", lambda: run_softmax(sub, x, dtype, case, seed, **kw))
