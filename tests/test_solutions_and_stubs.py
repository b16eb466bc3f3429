"""solutions/ scores full marks on every layer that runs here, hidden checks included; the shipped
stubs score zero, reported as not implemented, without crashing the grader; and a stub with only
its `raise NotImplementedError` lines deleted still scores zero on every CPU layer (issue 11: a
kernel whose body is `...` computes nothing, and a given run_sweep earns nothing by itself)."""

from __future__ import annotations

import pytest

from grader.registry import EXERCISES
from tests.corpus import (CPU, EXTENSION, EXTENSION_HIDDEN, EXTENSION_LAYERS, checks_of,
                          exercise_score, grade_exercise, lines, without_raises)
from tests.helpers import CPU_LAYERS, EXERCISES as STUBS, SOLUTIONS, grade


_STUBS: list = []   # the stubs' grade, started beside the solutions' (two grades, two cores)


def _stubs_future():
    if not _STUBS:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(1)
        _STUBS.append(pool.submit(grade, STUBS, "--layers", CPU_LAYERS, "--no-hidden"))
        pool.shutdown(wait=False)
    return _STUBS[0]


@pytest.fixture(scope="module")
def solutions_report():
    _stubs_future()
    return grade(SOLUTIONS, "--layers", CPU_LAYERS)


@pytest.fixture(scope="module")
def stubs_report():
    return _stubs_future().result()


def test_solutions_score_full_marks(solutions_report):
    ran = [t for t in solutions_report["tests"] if t["status"] != "not_run"]
    failing = [t for t in ran if t["status"] != "passed" or t["score"] < t["max_score"]]
    assert failing == [], lines(failing)
    assert solutions_report["score"] == solutions_report["max_score"] > 0
    assert {t["layer"] for t in ran} == set(CPU)


def test_solutions_are_graded_with_the_hidden_checks(solutions_report):
    hidden = [t for t in solutions_report["tests"] if t["hidden"]]
    assert {t["exercise"] for t in hidden} >= {"online_softmax", "tiled_attention",
                                               "softmax_triton", "flash_triton"}
    assert all(t["status"] == "passed" for t in hidden), lines(hidden)


@pytest.mark.parametrize("exercise", EXTENSION)
def test_extension_exercise_full_marks_public_and_hidden(solutions_report, exercise):
    """Each extension exercise, in the same grade: every check of the CPU layers it has ran and
    passed, its hidden checks among them (tests/test_extension_track.py has the track's rows)."""
    ran = checks_of(solutions_report, exercise)
    failing = [t for t in ran if t["status"] != "passed"]
    assert not failing, lines(failing)
    assert {t["layer"] for t in ran} == set(EXTENSION_LAYERS.get(exercise, CPU_LAYERS).split(","))
    assert EXTENSION_HIDDEN[exercise] <= {t["name"] for t in ran}
    score, top = exercise_score(solutions_report, exercise)
    assert score == top > 0


def test_stubs_score_zero_as_not_implemented(stubs_report):
    ran = [t for t in stubs_report["tests"] if t["status"] != "not_run"]
    assert ran and stubs_report["score"] == 0
    wrong = [t for t in ran if t["status"] != "not_implemented"]
    assert wrong == [], lines(wrong)
    assert_no_grader_traceback(ran)


def test_gpu_layers_are_not_run_here_and_not_counted(solutions_report):
    not_run = solutions_report["layers_not_run"]
    assert set(not_run) == {"gpu", "perf"}
    gpu = [t for t in solutions_report["tests"] if t["layer"] in ("gpu", "perf")]
    assert gpu and all(t["status"] == "not_run" and t["max_score"] == 0 for t in gpu)


@pytest.mark.parametrize("exercise", list(EXERCISES))
def test_stub_without_its_raise_scores_zero(exercise, tmp_path):
    source = without_raises((STUBS / f"{exercise}.py").read_text())
    report = grade_exercise(tmp_path, exercise, {f"{exercise}.py": source})
    ran = checks_of(report, exercise)
    assert {t["layer"] for t in ran}, f"no check of {exercise} ran"
    score, top = exercise_score(report, exercise)
    earned = [t for t in ran if t["score"] > 0]
    assert score == 0, (f"the {exercise} stub without its raise earned {score:g}/{top:g}:\n"
                        f"{lines(earned)}")
    assert_no_grader_traceback(ran)


def assert_no_grader_traceback(ran: list[dict]) -> None:
    """A failure is the student's code's, never a traceback from inside the grader."""
    internal = [t for t in ran if "Traceback" in t["message"] and "/grader/" in t["message"]]
    assert internal == [], lines(internal)
