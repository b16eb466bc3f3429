"""solutions/ scores full marks on every layer that runs here; the shipped stubs score zero,
reported as not implemented, without crashing the grader."""

from __future__ import annotations

import pytest

from tests.helpers import CPU_LAYERS, EXERCISES, SOLUTIONS, grade


@pytest.fixture(scope="module")
def solutions_report():
    return grade(SOLUTIONS, "--layers", CPU_LAYERS, "--no-hidden")


@pytest.fixture(scope="module")
def stubs_report():
    return grade(EXERCISES, "--layers", CPU_LAYERS, "--no-hidden")


def test_solutions_score_full_marks(solutions_report):
    ran = [t for t in solutions_report["tests"] if t["status"] != "not_run"]
    failing = [f"{t['name']}: {t['status']}: {t['message']}" for t in ran if t["status"] != "passed"]
    assert not failing, "\n".join(failing)
    assert solutions_report["score"] == solutions_report["max_score"] > 0
    assert {t["layer"] for t in ran} == set(CPU_LAYERS.split(","))


def test_stubs_score_zero_as_not_implemented(stubs_report):
    ran = [t for t in stubs_report["tests"] if t["status"] != "not_run"]
    assert ran and stubs_report["score"] == 0
    wrong = [f"{t['name']}: {t['status']}: {t['message']}" for t in ran if t["status"] != "not_implemented"]
    assert not wrong, "\n".join(wrong)


def test_gpu_layers_are_not_run_here_and_not_counted(solutions_report):
    not_run = solutions_report["layers_not_run"]
    assert set(not_run) == {"gpu", "perf"}
    gpu = [t for t in solutions_report["tests"] if t["layer"] in ("gpu", "perf")]
    assert gpu and all(t["status"] == "not_run" and t["max_score"] == 0 for t in gpu)
