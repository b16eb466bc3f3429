"""Known mistakes from the lesson, as edits to a solution file.

Each module here (one per exercise) lists `MUTANTS`. tests/test_mutants.py applies each one to a
copy of solutions/, grades only that exercise and only the checks aimed at the mistake, and
requires that those checks lose points and that their hint names the idea (`idea`).
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
    idea: str              # a word or phrase the hint of each of those checks must contain
    also: tuple = ()       # further (find, replace) pairs, for a mistake that takes several edits

    def apply(self, source: str) -> str:
        for find, replace in ((self.find, self.replace), *self.also):
            count = source.count(find)
            if count != 1:
                raise AssertionError(f"mutant {self.name}: expected the text once in "
                                     f"solutions/{self.exercise}.py, found it {count} times: {find!r}")
            source = source.replace(find, replace)
        return source
