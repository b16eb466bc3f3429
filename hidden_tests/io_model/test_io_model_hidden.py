"""Hidden checks for io_model: the counts on long contexts (N up to 1M, where a count in float32
or a fixed-width integer would lose digits) and 1- and 8-byte elements, which the public checks
do not use, each call made twice (an answer kept between calls, or hard-coded for the lesson's
shapes, fails here)."""

from __future__ import annotations

import pytest

from grader.exercises.io_model import reference
from grader.exercises.io_model.judging import check_answer
from grader.judge.answers.compare import CheckFailed
from grader.judge.answers.cases import Cases


def _calls(rng):
    """(function, args, exact) for every count at long-context shapes."""
    calls = []
    for N, d, e in reference.shapes(rng, 4, elem=(1, 8), high=1 << 20):
        N = max(N, 1 << 15)
        Br, Bc = (int(b) for b in rng.choice(reference.BLOCKS, size=2, replace=False))
        M = int(rng.integers(16 << 10, 1 << 20))
        H, B = int(rng.integers(1, 129)), int(rng.integers(1, 9))
        calls += [("naive_bytes", (N, d, e), True), ("naive_flops", (N, d), True),
                  ("naive_intensity", (N, d, e), False),
                  ("flash_bytes_worst", (N, d, Br, Bc, e), True),
                  ("flash_bytes_l2", (N, d, e), True), ("flash_bytes_sram", (N, d, M, e), False),
                  ("sp_bytes", (H, N, e, B), True), ("flash_state_bytes", (H, N, B), True)]
    return calls


@pytest.mark.check("io_model.hidden_shapes")
def test_hidden_shapes(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for fn, args, exact in _calls(rng):
        for call in (1, 2):
            label = f"call {call} of 2 with these arguments"
            with cases.case(f"{fn}{args}, {label}", seed=rng.seed):
                try:
                    check_answer(sub, fn, args, exact=exact, case=label, seed=rng.seed)
                except CheckFailed as e:
                    if call == 2:
                        raise CheckFailed(str(e), hint="The first call with these arguments was "
                                          "right and the second was not: is something kept "
                                          "between calls?") from None
                    raise
    cases.finish()
