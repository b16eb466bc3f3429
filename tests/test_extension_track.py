"""The extension track has points of its own and leaves the core's 100 alone; each of its
exercises (flash_decode, attention_backward, flash_backward, io_model, softmax_long) gets full marks from the solution
on the CPU layers it has, public and hidden (asserted on the one grade of all solutions,
tests/test_solutions_and_stubs.py), zero from the stub without a grader error. Their mutants run
in tests/test_mutants.py with the others."""

from __future__ import annotations

import pytest

from grader import registry
from tests.corpus import EXTENSION, EXTENSION_HIDDEN as HIDDEN, EXTENSION_LAYERS as LAYERS
from tests.helpers import CPU_LAYERS, EXERCISES, grade



def test_every_extension_exercise_is_covered():
    assert set(EXTENSION) == set(HIDDEN)


def test_core_total_is_100():
    assert registry.public_total() == 100
    assert registry.public_total("core") == 100
    assert sum(c.points for c in registry.CHECKS
               if registry.EXERCISES[c.exercise].track == "core") == 100


def test_extension_rows_are_their_own_track():
    rows = [c for c in registry.all_checks().values() if c.exercise in EXTENSION]
    assert registry.public_total("extension") == sum(c.points for c in rows if not c.hidden) > 0
    for name in EXTENSION:
        own = [c for c in rows if c.exercise == name]
        assert sum(c.points for c in own if not c.hidden) > 0, name
        assert any(c.hidden for c in own), f"hidden_tests/{name}/rows.py should add {name} rows"
    decode = {c.layer for c in rows if c.exercise == "flash_decode"}
    assert decode == set(registry.LAYERS)
    assert {c.layer for c in rows if c.exercise == "attention_backward"} == {"cpu", "adversarial"}
    assert {c.layer for c in rows if c.exercise == "flash_backward"} == {"adversarial", "interp",
                                                                         "gpu", "perf"}


@pytest.mark.parametrize("exercise", EXTENSION)
def test_follows_point_at_checks_of_the_exercise_without_cycles(exercise):
    rows = {c.id: c for c in registry.all_checks().values() if c.exercise == exercise}
    for c in rows.values():
        assert set(c.follows) <= set(rows) - {c.id}, c.id

    def reaches(start, target, seen=()):
        return any(f == target or (f not in seen and reaches(f, target, (*seen, f)))
                   for f in rows[start].follows)

    assert not [c for c in rows if reaches(c, c)], "a cycle in follows: no check could lead"


@pytest.mark.parametrize("exercise", EXTENSION)
def test_stub_scores_zero_as_not_implemented(exercise):
    report = grade(EXERCISES, "--exercises", exercise, "--layers", LAYERS.get(exercise, CPU_LAYERS))
    ran = [t for t in report["tests"] if t["status"] != "not_run"]
    assert ran and report["score"] == 0
    wrong = [f"{t['name']}: {t['status']}: {t['message']}" for t in ran
             if t["status"] != "not_implemented"]
    assert not wrong, "\n".join(wrong)

# Their mutants (tests/exercises/flash_decode/mutants.py, attention_backward/mutants.py) run in
# tests/test_mutants.py with the others.
