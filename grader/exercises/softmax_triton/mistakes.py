"""The softmax mistakes a failure of softmax_triton can name, by the answer each would have
produced: exp(x - max) not divided by the row sum, and the padded lanes of the block read as 0.
run_softmax (judging.py) computes them from the same x when a comparison fails; the hint names
the mistake only when the output equals its answer to tolerance (grader.judge.answers.diagnose),
else the registry's general hint stays."""

from __future__ import annotations

import numpy as np

from grader.judge.answers.diagnose import first_match, tolerance


SOFTMAX_DIVIDE = ("The output equals exp(x - max) without the division by the row sum, to "
                  "tolerance: divide the numerator by den = tl.sum(num, axis=0).")
SOFTMAX_PADDED = ("The output equals the softmax of each row with its {pad} padded lanes (a "
                  "block of {block}) read as 0, to tolerance: they raised the max and the row "
                  "sum. Load the padding as other=-inf: exp(-inf - max) = 0 adds nothing.")


def softmax_hint(got, x, *, dtype: str | None = None, block: int | None = None) -> str:
    """The hint for a row softmax output that equals a known mistake's answer, else ""."""
    x = np.asarray(x, dtype=np.float64)
    atol, rtol = tolerance(dtype)
    n = x.shape[-1]
    block = block or 1 << max(n - 1, 0).bit_length()

    def padded():
        m = np.maximum(x.max(-1, keepdims=True), 0.0)
        e = np.exp(x - m)
        return e / (e.sum(-1, keepdims=True) + (block - n) * np.exp(-m))

    candidates = [(lambda: np.exp(x - x.max(-1, keepdims=True)), SOFTMAX_DIVIDE)]
    if block > n:
        candidates.append((padded, SOFTMAX_PADDED.format(pad=block - n, block=block)))
    return first_match(got, candidates, atol, rtol)
