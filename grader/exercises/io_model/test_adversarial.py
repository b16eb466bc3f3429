"""io_model's adversarial check (Break It 1's numbers): where e^x overflows each float format.
fp16 and fp32 are the lesson's 11.09 and 88.7; float64 (709.78) is in no lesson sentence, so a
table of the two quoted constants fails there. Judged as in test_cpu.py (judging.py)."""

from __future__ import annotations

import pytest

from grader.exercises.io_model import reference
from grader.exercises.io_model.judging import check_all


@pytest.mark.check("io_model.exp_overflow")
def test_exp_overflow(student, rng, credit):
    dtypes = ["float16", "float32", "float64"]
    order = [dtypes[i] for i in rng.permutation(3)]
    calls = [((dt,), dt) for dt in order] + reference.lesson_calls("exp_overflow")
    check_all(student(), "exp_overflow", calls, credit, exact=False, seed=rng.seed)
