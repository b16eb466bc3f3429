"""The extension track has points of its own and leaves the core's 100 alone; flash_decode (its
exercise) gets full marks from the solution on the CPU layers, public and hidden, zero from the
stub without a grader error. Its mutants run in tests/test_mutants.py with the others."""

from __future__ import annotations

import pytest

from grader import registry
from tests.helpers import CPU_LAYERS, EXERCISES, SOLUTIONS, grade

EXERCISE = "flash_decode"


def test_core_total_is_100():
    assert registry.public_total() == 100
    assert registry.public_total("core") == 100
    assert sum(c.points for c in registry.CHECKS
               if registry.EXERCISES[c.exercise].track == "core") == 100


def test_extension_rows_are_their_own_track():
    assert registry.EXERCISES[EXERCISE].track == "extension"
    rows = [c for c in registry.all_checks().values() if c.exercise == EXERCISE]
    assert {c.layer for c in rows} == set(registry.LAYERS)
    assert registry.public_total("extension") == sum(c.points for c in rows if not c.hidden) > 0
    assert any(c.hidden for c in rows), "hidden_tests/checks.py should add flash_decode rows"


def test_follows_point_at_checks_of_the_exercise_without_cycles():
    rows = {c.id: c for c in registry.all_checks().values() if c.exercise == EXERCISE}
    for c in rows.values():
        assert set(c.follows) <= set(rows) - {c.id}, c.id

    def reaches(start, target, seen=()):
        return any(f == target or (f not in seen and reaches(f, target, (*seen, f)))
                   for f in rows[start].follows)

    assert not [c for c in rows if reaches(c, c)], "a cycle in follows: no check could lead"


@pytest.fixture(scope="module")
def solution_report():
    return grade(SOLUTIONS, "--exercises", EXERCISE, "--layers", CPU_LAYERS)


def test_solution_full_marks_public_and_hidden(solution_report):
    ran = [t for t in solution_report["tests"] if t["status"] != "not_run"]
    failing = [f"{t['name']}: {t['status']}: {t['message']}" for t in ran if t["status"] != "passed"]
    assert not failing, "\n".join(failing)
    assert {t["layer"] for t in ran} == set(CPU_LAYERS.split(","))
    assert {"flash_decode.hidden_shapes", "flash_decode.hidden_merge"} <= {t["name"] for t in ran}
    assert solution_report["score"] == solution_report["max_score"] > 0


def test_stub_scores_zero_as_not_implemented():
    report = grade(EXERCISES, "--exercises", EXERCISE, "--layers", CPU_LAYERS)
    ran = [t for t in report["tests"] if t["status"] != "not_run"]
    assert ran and report["score"] == 0
    wrong = [f"{t['name']}: {t['status']}: {t['message']}" for t in ran
             if t["status"] != "not_implemented"]
    assert not wrong, "\n".join(wrong)

# flash_decode's mutants (tests/mutants/flash_decode.py) run in tests/test_mutants.py with the others.
