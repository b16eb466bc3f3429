"""Known mistakes from the lesson, as edits to a solution file.

Each module here (one per exercise) lists `MUTANTS`. tests/test_mutants.py applies each one to a
copy of solutions/ and grades its whole exercise (every check of the CPU layers it has, public
checks only). It requires that
  - every check in `checks` loses points;
  - `idea` appears (case-insensitive) in each of those failures' own words: the message, or the
    hint the failure gave (CheckFailed(..., hint=...)), never only the registry's fixed hint;
  - the report leads with one of `checks` (report["failures"][0]["lead"]) and every other check
    of the exercise that lost points is grouped under it (its "same_cause").

A mistake only a GPU can show (a race between programs: the interpreter runs them one after
another) has `checks=()` and names its gpu-layer checks in `gpu`: on the CPU layers it must get
full marks (so it runs, and is right but for the race); tools/gpu_mutants.py requires on the GPU
that each check in `gpu` loses points and names `idea`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    exercise: str
    find: str              # text in solutions/<exercise>.py, exactly once
    replace: str
    checks: tuple          # registry ids that must lose points
    idea: str              # a word or phrase each of those failures must say in its own words
    also: tuple = ()       # further (find, replace) pairs, for a mistake that takes several edits
    gpu: tuple = ()        # gpu-layer check ids that must catch it on a GPU (checks=() if only there)

    def apply(self, source: str) -> str:
        for find, replace in ((self.find, self.replace), *self.also):
            count = source.count(find)
            if count != 1:
                raise AssertionError(f"mutant {self.name}: expected the text once in "
                                     f"solutions/{self.exercise}.py, found it {count} times: {find!r}")
            source = source.replace(find, replace)
        return source
