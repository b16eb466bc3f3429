"""io_model's own formulas reproduce the lesson's worked numbers (grader/exercises/io_model/
reference.py LESSON): the checks compare students with these formulas, so they must say what the
lesson says, within the lesson's rounding."""

from __future__ import annotations

import pytest

from grader.exercises.io_model import reference

CASES = [(fn, *row) for fn, rows in reference.LESSON.items() for row in rows]


@pytest.mark.parametrize("fn, args, said, rounding, label", CASES,
                         ids=[f"{c[0]}{c[1]}" for c in CASES])
def test_formula_says_what_the_lesson_says(fn, args, said, rounding, label):
    got = getattr(reference, fn)(*args)
    if isinstance(said, str):
        assert got == said, label
    else:
        assert got == pytest.approx(said, rel=rounding), label


def test_counts_are_exact_integers():
    assert isinstance(reference.naive_bytes(100003, 77, 2), int)
    assert reference.flash_bytes_worst(1000, 64, 64, 32, 2) == (2 + 16 * 2) * 1000 * 64 * 2
    assert reference.flash_bytes_worst(1024, 64, 64, 32, 2) == \
        (2 * 1024 * 64 + 2 * 1024 ** 2 * 64 // 64) * 2     # the lesson's 2Nd + 2N^2 d / Br
    assert reference.flash_bytes_sram(4096, 128, 128 * 128, 2) == pytest.approx(
        reference.flash_bytes_worst(4096, 128, 128, 64, 2), rel=1e-12)   # Br = M / d
