"""Wrong work never earns points it should not (issue 11).

Each tests/exercises/<exercise>/wrong/<case>/ holds the wrong exercise file(s) (or edits of the
solution's, see tests/cases.folder_files) and expect.json:

    {"exercise": "flash_triton", "layers": "cpu,adversarial,interp",
     "max_score": 0 | null, "must_fail": ["flash_triton.guard_bands", ...], "why": "..."}

The case is graded as a copy of solutions/ with its files put in place, on its exercise only,
the given layers (those that run on this machine), hidden checks included (beside cases of other
exercises, each reading its own exercise's part of the report: tests.packs). `max_score` 0: the
exercise earns nothing (work that computes or measures nothing); null: no bound. Every
`must_fail` check loses points, or, for an advice check (Check.advice: 0 points), shows advice. tools/gpu_cheats.py grades the max_score 0 cases of Triton and
bench exercises on the gpu and perf layers too, and the cases with the optional `"gpu_zero": true`
(work that keeps a CPU point but must earn nothing on the GPU layers, e.g. a timer that makes
every call and returns a constant: its dishonest timers are still right).
"""

from __future__ import annotations

import json

import pytest

from grader.registry import EXERCISES, LAYERS, all_checks
from tests.cases import cases, exercise_of
from tests.corpus import exercise_score, folder_files, line, lines, checks_of
from tests.packs import Packs

CASES = cases("wrong")
KEYS = {"exercise", "layers", "max_score", "must_fail", "why"}
OPTIONAL = {"gpu_zero"}


def expectation(case) -> dict:
    return json.loads((case / "expect.json").read_text())


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _layers(expect: dict) -> str:
    """The case's layers that run on this machine."""
    here = set(LAYERS) - (set() if _cuda() else {"gpu", "perf"})
    return ",".join(layer for layer in expect["layers"].split(",") if layer in here)


# wrong work of different exercises graded together, each reading its own part (tests.packs)
PACKED = Packs(CASES, name=lambda case: case.name,
               exercise=lambda case: expectation(case)["exercise"], files=folder_files,
               layers=lambda case: _layers(expectation(case)),
               packable=lambda case: len(folder_files(case)) == 1)
PACKS = {"test_wrong_work_loses_its_points": PACKED}   # tests.conftest: one xdist process per pack


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_case_is_well_formed(case):
    expect = expectation(case)
    assert KEYS <= set(expect) <= KEYS | OPTIONAL, (
        f"{case.name}/expect.json: keys {sorted(expect)}, want {sorted(KEYS)} (and maybe "
        f"{sorted(OPTIONAL)})")
    assert expect.get("gpu_zero", True) is True, "gpu_zero is true or absent"
    assert expect["exercise"] in EXERCISES, expect["exercise"]
    assert expect["exercise"] == exercise_of(case), f"{case.name} is in {exercise_of(case)}'s folder"
    assert expect["max_score"] in (0, None), "max_score is 0 or null"
    assert expect["why"].strip(), "say why it is wrong"
    assert all(layer in LAYERS for layer in expect["layers"].split(",")), expect["layers"]
    files = folder_files(case)
    assert files, f"{case.name} holds no exercise file"
    assert all(name[:-3] in EXERCISES for name in files), sorted(files)
    registry = all_checks()
    for check_id in expect["must_fail"]:
        assert check_id in registry, f"{case.name}: must_fail names no check {check_id!r}"
        assert registry[check_id].exercise == expect["exercise"], check_id
    assert expect["must_fail"] or expect["max_score"] == 0, "name a check that must fail, or max 0"


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_wrong_work_loses_its_points(case, request):
    expect = expectation(case)
    exercise = expect["exercise"]
    layers = _layers(expect)
    report = PACKED.report(case, request, "case")
    ran = checks_of(report, exercise)
    assert ran, f"{case.name}: no check of {exercise} ran on {layers}"
    results = {t["name"]: t for t in report["tests"]}
    registry = all_checks()
    for check_id in expect["must_fail"]:
        if registry[check_id].layer not in layers.split(","):
            continue                       # a gpu or perf check, on a machine without CUDA
        r = results[check_id]
        if registry[check_id].advice:   # pays nothing: it must show the advice instead
            assert r["status"] == "advice", (
                f"{case.name}: {check_id} should give advice ({expect['why']}): {line(r)}"
                f"\nall checks:\n{lines(ran)}")
            continue
        assert r["status"] != "not_run" and r["score"] < r["max_score"], (
            f"{case.name}: {check_id} should lose points ({expect['why']}): {line(r)}"
            f"\nall checks:\n{lines(ran)}")
    if expect["max_score"] == 0:
        score, top = exercise_score(report, exercise)
        earned = [t for t in ran if t["score"] > 0]
        assert score == 0, (f"{case.name} earned {score:g}/{top:g} on {exercise} "
                            f"({expect['why']}):\n{lines(earned)}")
