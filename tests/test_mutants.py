"""Each known mistake, applied to a solution, loses the points of the check aimed at it, says
why in this failure's own words, and leads the report, with every other failure of its exercise
grouped under it (issue 10: one mistake, one lead, no hint pointing elsewhere). A mistake only
an advice check sees (Check.advice: its evidence is a record the student's process could rewrite)
keeps its points and shows that advice, naming the idea.

A mutant (tests.cases.Mutant, listed in tests/exercises/<exercise>/mutants.py) is graded on its
whole exercise: every check it has on the CPU layers (cpu, adversarial, interp), public checks only (`--no-hidden`: the hidden checks
mix ideas on purpose), without the provenance replay (a mutant is a wrong answer, caught by
comparison; the replay is proved by the solutions, variants and cheats, and doubles an
interpreter grade). Mutants of different exercises share one grade, whatever layers each has
(tests.packs: each reads its own exercise's part of the report, as if graded alone).
"""

from __future__ import annotations

import pytest

from grader.registry import all_checks
from tests.cases import mutants
from tests.corpus import CPU, SOLUTIONS, line, lines, losing
from tests.packs import Packs

ALL = mutants()


def _files(mutant) -> dict[str, str]:
    source = (SOLUTIONS / f"{mutant.exercise}.py").read_text()
    return {f"{mutant.exercise}.py": mutant.apply(source)}


# mutants of different exercises graded together, each reading its own exercise (tests.packs)
PACKED = Packs(ALL, name=lambda m: f"{m.exercise}-{m.name}", exercise=lambda m: m.exercise,
               files=_files, layers=lambda m: ",".join(CPU), hidden=False, replay=False)
PACKS = {"test_mutant_is_caught": PACKED}   # tests.conftest: one xdist process per pack


def test_mutants_name_public_checks():
    registry = all_checks(include_hidden=False)
    for m in ALL:
        for check_id in m.checks + m.gpu:
            assert check_id in registry, f"mutant {m.exercise}.{m.name}: no public check {check_id}"
            assert registry[check_id].exercise == m.exercise, (m.name, check_id)
        assert all(registry[c].layer == "gpu" for c in m.gpu), (m.name, m.gpu)
        for check_id in m.advice:
            assert check_id in registry and registry[check_id].advice, (m.name, check_id)
            assert registry[check_id].exercise == m.exercise, (m.name, check_id)
        assert not any(registry[c].advice for c in m.checks), (
            f"mutant {m.exercise}.{m.name}: an advice check pays nothing, name it in advice=")
        assert m.checks or m.gpu or m.advice, f"mutant {m.exercise}.{m.name} names no check to catch it"
        assert m.idea.strip(), f"mutant {m.exercise}.{m.name} names no idea"


def own_words(t: dict) -> str:
    """What this failure said about itself: its message, and its hint only when the failure
    gave one (never the registry's fixed hint, which says the same whatever went wrong)."""
    return t["message"] + ("\n" + t["hint"] if t.get("hint_from_failure") else "")


@pytest.mark.parametrize("mutant", ALL, ids=lambda m: f"{m.exercise}-{m.name}")
def test_mutant_is_caught(mutant, request):
    report = PACKED.report(mutant, request, "mutant")
    results = {t["name"]: t for t in report["tests"]}
    failing = losing(report, mutant.exercise)
    context = f"\nfailing checks of {mutant.exercise}:\n{lines(failing)}"
    # 0. the advice checks aimed at it show advice naming the idea, and cost nothing
    for check_id in mutant.advice:
        r = results[check_id]
        assert r["status"] == "advice" and r["score"] == r["max_score"] == 0, (
            f"{check_id} should give advice on {mutant.name}: {line(r)}")
        assert mutant.idea.lower() in own_words(r).lower(), (
            f"{check_id}: the advice should name {mutant.idea!r} in its own words: {line(r)}")
        assert check_id in report.get("advice", []), report.get("advice")
    if not mutant.checks:
        # a mistake only a GPU shows (mutant.gpu; tools/gpu_mutants.py): here it runs, and is
        # right, so that on the GPU it is caught for its race and not for a crash; a mistake
        # only advice sees (mutant.advice) is right too, and keeps every point
        assert failing == [], f"{mutant.name} should be right on the CPU layers{context}"
        return

    # 1. the checks aimed at the mistake lose points, and say so in their own words
    for check_id in mutant.checks:
        r = results[check_id]
        assert r["status"] != "not_run", f"{check_id} did not run: {line(r)}"
        assert r["score"] < r["max_score"], f"{check_id} should catch {mutant.name}: {line(r)}"
        assert r["message"], f"{check_id} failed without saying expected vs got: {line(r)}"
        named = mutant.idea.lower() in own_words(r).lower()
        assert named, (
            f"{check_id}: the failure's message (or its own hint) should name {mutant.idea!r}; "
            f"the registry's fixed hint does not count: {line(r)}")

    # 2. the report leads with one of them, and groups every other failure of the exercise
    #    under it as probably the same cause
    assert "failures" in report, "the JSON report has no 'failures' list (lead / same_cause)"
    groups = report["failures"]
    assert groups, f"the report lists no failures for {mutant.name}{context}"
    lead = groups[0]
    assert lead["lead"] in mutant.checks, (
        f"the report leads with {lead['lead']}, expected one of {list(mutant.checks)}{context}")
    others = sorted(t["name"] for t in failing if t["name"] != lead["lead"])
    stray = [c for c in others if c not in lead["same_cause"]]
    assert stray == [], (f"{stray} failed too but are not grouped under {lead['lead']} "
                       f"(same_cause: {lead['same_cause']}){context}")
