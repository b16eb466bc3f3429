"""Each known mistake, applied to a solution, loses points in the check aimed at it."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from grader.registry import all_checks
from tests import mutants
from tests.helpers import SOLUTIONS, by_id, copy_solutions, grade

ALL = [m for info in pkgutil.iter_modules(mutants.__path__)
       for m in importlib.import_module(f"tests.mutants.{info.name}").MUTANTS]


@pytest.mark.parametrize("mutant", ALL, ids=lambda m: f"{m.exercise}-{m.name}")
def test_mutant_is_caught(mutant, tmp_path):
    source = (SOLUTIONS / f"{mutant.exercise}.py").read_text()
    sub = copy_solutions(tmp_path / "sub", {f"{mutant.exercise}.py": mutant.apply(source)})
    registry = all_checks(include_hidden=False)
    layers = sorted({registry[c].layer for c in mutant.checks})
    report = grade(sub, "--exercises", mutant.exercise, "--checks", ",".join(mutant.checks),
                   "--layers", ",".join(layers), "--no-hidden")
    results = by_id(report)
    for check_id in mutant.checks:
        r = results[check_id]
        assert r["status"] in ("failed", "error"), f"{check_id} should catch {mutant.name}: {r}"
        assert r["score"] < r["max_score"], r
        assert mutant.idea.lower() in r["hint"].lower(), \
            f"the hint of {check_id} should name {mutant.idea!r}: {r['hint']!r}"
        assert r["message"], f"{check_id} failed without saying expected vs got"
