"""Correct work in any reasonable style gets full marks; near-correct work loses only the check
for its one flaw (issue 10).

Each tests/exercises/<exercise>/variants/<case>/ holds exercise file(s), graded as a copy of
solutions/ with them put in place, on each exercise they belong to, every CPU layer it has, hidden
checks included (a variant of one exercise beside variants of others, each reading its own
exercise's part of the report: tests.packs). A case with files of several exercises lives in the
folder of the latest of them in the lesson (it needs them all).

- Without expect.json the variant is correct: every check scores full marks.
- With expect.json, {"loses_only": [check ids], "names": [words], "why": "..."}, it is
  near-correct: among the public checks exactly those in `loses_only` lose points, each says
  every word of `names` in its own words (its message, or the hint the failure gave), and the
  report leads with one of them with every other failure (hidden checks included) grouped under
  it as the same cause. An optional "advice": [check ids] names the advice checks (Check.advice,
  0 points) that must show advice, saying `names`, and no other; with "loses_only": [] the
  variant keeps every point.
- A correct variant gets no advice either.
"""

from __future__ import annotations

import json

import pytest

from grader.registry import EXERCISES, all_checks
from tests.cases import cases, exercise_of
from tests.corpus import CPU, checks_of, folder_files, grade_exercise, line, lines, losing
from tests.packs import Packs

CASES = cases("variants")
CORRECT = [c for c in CASES if not (c / "expect.json").exists()]
NEAR = [c for c in CASES if (c / "expect.json").exists()]


def exercises_of(case) -> list[str]:
    names = [name[:-3] for name in folder_files(case)]
    assert names and all(n in EXERCISES for n in names), f"{case.name}: {names}"
    return names


def _grade(case, tmp_path) -> dict:
    """{exercise: report} of the case, each graded on its own exercise."""
    files = folder_files(case)
    return {e: grade_exercise(tmp_path / e, e, files) for e in exercises_of(case)}


# correct variants of one exercise each graded with those of others (tests.packs); a variant of
# several exercises is graded exercise by exercise (_grade)
def _packs(variants) -> Packs:
    return Packs([c for c in variants if len(exercises_of(c)) == 1], name=lambda case: case.name,
                 exercise=lambda case: exercises_of(case)[0], files=folder_files,
                 layers=lambda case: ",".join(CPU))   # each reads its own exercise's checks


CORRECT_PACKS, NEAR_PACKS = _packs(CORRECT), _packs(NEAR)
PACKS = {"test_correct_variant_scores_full_marks": CORRECT_PACKS,    # tests.conftest: one xdist
         "test_near_correct_variant_loses_only_its_flaw": NEAR_PACKS}  # process per pack


def own_words(t: dict) -> str:
    return t["message"] + ("\n" + t["hint"] if t.get("hint_from_failure") else "")


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_case_is_well_formed(case):
    names = exercises_of(case)
    latest = max(names, key=lambda e: EXERCISES[e].order)
    assert exercise_of(case) == latest, f"{case.name} belongs in {latest}'s folder"
    if (case / "expect.json").exists():
        expect = json.loads((case / "expect.json").read_text())
        assert {"loses_only", "names", "why"} <= set(expect) <= {"loses_only", "names", "why",
                                                                  "advice"}, sorted(expect)
        assert expect["loses_only"] or expect.get("advice"), "name a check that loses or advises"
        assert len(exercises_of(case)) == 1, "a near-correct variant holds one exercise file"
        registry = all_checks(include_hidden=False)
        for check_id in expect["loses_only"]:
            assert check_id in registry, f"{case.name}: no public check {check_id!r}"
            assert not registry[check_id].advice, f"{check_id} pays nothing: name it in advice"
        for check_id in expect.get("advice", []):
            assert check_id in registry and registry[check_id].advice, check_id


@pytest.mark.parametrize("case", CORRECT, ids=lambda p: p.name)
def test_correct_variant_scores_full_marks(case, tmp_path, request):
    if case.name in CORRECT_PACKS.pack_of:
        (exercise,) = exercises_of(case)
        reports = {exercise: CORRECT_PACKS.report(case, request, "case")}
    else:
        reports = _grade(case, tmp_path)
    for exercise, report in reports.items():
        ran = checks_of(report, exercise)
        assert ran, f"{case.name}: no check of {exercise} ran"
        lost = losing(report, exercise)
        assert lost == [], f"{case.name} is correct but lost points on {exercise}:\n{lines(lost)}"
        advised = [t for t in checks_of(report, exercise) if t["status"] == "advice"]
        assert advised == [], f"{case.name} is correct but got advice on {exercise}:\n{lines(advised)}"


@pytest.mark.parametrize("case", NEAR, ids=lambda p: p.name)
def test_near_correct_variant_loses_only_its_flaw(case, request):
    expect = json.loads((case / "expect.json").read_text())
    (exercise,) = exercises_of(case)
    report = NEAR_PACKS.report(case, request, "case")
    lost = losing(report, exercise)
    context = f"\n{case.name} ({expect['why']})\nchecks that lost points:\n{lines(lost)}"
    # a property check (bounds, a launch) on a call the flaw made wrong pays nothing either
    # (issue 18): it may lose points as a secondary failure, grouped under the flaw's check below
    public = sorted(t["name"] for t in lost if not t["hidden"] and not t.get("secondary"))
    assert public == sorted(expect["loses_only"]), (
        f"expected only {expect['loses_only']} to lose points among the public checks{context}")
    advised = sorted(t["name"] for t in checks_of(report, exercise)
                     if t["status"] == "advice" and not t["hidden"])
    assert advised == sorted(expect.get("advice", [])), (
        f"expected advice from {expect.get('advice', [])} alone, got {advised}{context}")
    for t in checks_of(report, exercise):
        if t["name"] in expect["loses_only"] or t["name"] in advised:
            missing = [w for w in expect["names"] if w.lower() not in own_words(t).lower()]
            assert missing == [], f"{t['name']} should say {missing} in its own words: {line(t)}"
    if not expect["loses_only"]:   # advice alone: every point kept, no failure to lead
        assert lost == [], f"{case.name} should keep every point{context}"
        return
    assert "failures" in report, "the JSON report has no 'failures' list (lead / same_cause)"
    lead = report["failures"][0]
    assert lead["lead"] in expect["loses_only"], f"the report leads with {lead['lead']}{context}"
    stray = sorted(t["name"] for t in lost if t["name"] != lead["lead"]
                   and t["name"] not in lead["same_cause"])
    assert stray == [], f"{stray} are not grouped under {lead['lead']}{context}"
