"""The one case runner: a check's cases, each worth an equal share of its points.

    cases = Cases(credit)
    for N, d in SHAPES:
        with cases.case(f"N={N}, d={d}, float32", seed=rng.seed):
            ...                      # call the student, assert_close
    cases.finish()

or, with the cases as callables, `run_cases(credit, [("float16 (5, 781) [seed 42]", lambda: ...)])`.
"""

from __future__ import annotations

from grader import errors
from grader.judge.answers.compare import CheckFailed


class Cases:
    """The cases of one check. A wrong answer (CheckFailed) fails the whole check at once: wrong work earns nothing. A
    case whose call raised (an exception, a return the grader cannot read, a crashed worker)
    earns nothing, and the report names it (shape, dtype, seed; the exception gives the
    student's file and line). Points are only for answers: when half the cases or more
    raised, the check earns nothing and says which case raised first; otherwise it keeps the
    share of the cases that were right. A stub (NotImplementedError) or a timeout still stops
    the check at once.
    """

    PROBLEMS = (errors.StudentRaised, errors.BadReturn, errors.WorkerCrashed)

    def __init__(self, credit):
        self.credit = credit
        self.total = 0
        self.raised: list[tuple[str, Exception]] = []

    def case(self, label: str, seed: int | None = None):
        self.total += 1
        return _Case(self, label, f", seed {seed}" if seed is not None else "")

    def finish(self) -> None:
        if not self.raised:
            return
        label, first = self.raised[0]
        if 2 * len(self.raised) >= self.total:
            count = "every case" if len(self.raised) == self.total else \
                f"{len(self.raised)} of {self.total} cases"
            raise type(first)(f"{count} raised, so the check earns nothing; the first "
                              f"({label}): {first}") from None
        names = "; ".join(label for label, _ in self.raised[:3])
        if len(self.raised) > 3:
            names += f"; and {len(self.raised) - 3} more"
        self.credit.set((self.total - len(self.raised)) / self.total,
                        f"{len(self.raised)} of {self.total} cases raised an exception and earn "
                        f"nothing ({names}); the first: {first}")


class _Case:
    def __init__(self, cases: Cases, label: str, seed: str):
        self.cases, self.label, self.seed = cases, label, seed

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if isinstance(value, Cases.PROBLEMS):
            self.cases.raised.append((self.label + self.seed, value))
            return True
        if isinstance(value, CheckFailed) and self.label not in str(value):
            raise CheckFailed(f"{value} (case: {self.label}{self.seed})", hint=value.hint,
                              follows=value.follows, secondary=value.secondary,
                              kind=value.kind, picture=value.picture) from None
        return False


def run_cases(credit, cases: list) -> None:
    """cases: [(label, callable)]; label names the case (shape, dtype, seed). Scored as
    Cases scores its cases."""
    runner = Cases(credit)
    for label, run in cases:
        with runner.case(label):
            run()
    runner.finish()
