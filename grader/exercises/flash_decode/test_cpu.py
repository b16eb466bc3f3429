"""flash_decode's cpu checks: merge_partials, the NumPy part (lesson: the Flash-Decoding
paragraph and the merge rule from "Online softmax").

merge_partials gets partial states (m, l, acc) that the grader computes here, in float64, from
fresh random scores and values split at random places; the answer is softmax(s) @ v over all the
keys.
"""

from __future__ import annotations

import pytest

from grader.exercises.flash_decode.judging import assert_merge
from grader.exercises.flash_decode.reference import attention_rows, state_of
from grader.judge.answers.inputs import chunks, randn


@pytest.mark.check("flash_decode.merge_matches_one_pass")
def test_merge_matches_one_pass(student, rng):
    sub = student()
    for scale in (1, 10, 100):
        rows, n, D = 3, 500, int(rng.choice([32, 64]))
        s = randn(rng, (rows, n), "float64", scale)
        v = randn(rng, (n, D), "float64")
        expected = attention_rows(s, v)
        parts = [state_of(s[:, c], v[c]) for c in chunks(rng, n, 7)]
        orders = {"left to right": parts, "shuffled": [parts[i] for i in rng.permutation(7)],
                  "right to left": parts[::-1]}
        for name, order in orders.items():
            assert_merge(sub, order, expected, f"merge_partials of 7 uneven splits, {name} "
                         f"(rows={rows}, D={D}, scores * {scale})", rng.seed)
        # one row, as plain floats m, l and an acc of shape (D,)
        one = [(float(m[0]), float(l[0]), acc[0]) for m, l, acc in parts]
        assert_merge(sub, one, expected[0], f"merge_partials of 7 splits of one row, m and l "
                     f"floats, acc (D,) (scores * {scale})", rng.seed)
