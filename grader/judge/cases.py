"""Running a check's cases one by one: a case the student's code cannot run costs that case's
share, and every failure names its case.

    run_cases(credit, [("float16 (5, 781) [seed 42]", lambda: ...), ...])

A wrong answer (CheckFailed) fails the whole check: the check's idea is wrong, and one mistake
must not earn part of the points. An exception in the student's code (StudentRaised, BadReturn,
a crash) fails only its case; the check keeps the share of the cases that ran. When no case
ran, the first problem is raised as it is, so a stub stays "not implemented".
"""

from __future__ import annotations

from grader import errors
from grader.judge.compare import CheckFailed

_CASE_PROBLEMS = (errors.StudentRaised, errors.BadReturn, errors.WorkerCrashed)


def run_cases(credit, cases: list) -> None:
    """cases: [(label, callable)]; label names the case (shape, dtype, seed)."""
    passed, first = 0, None
    for label, run in cases:
        try:
            run()
            passed += 1
        except CheckFailed:
            raise
        except errors.NotImplementedByStudent:
            raise
        except _CASE_PROBLEMS as e:
            if first is None:
                first = type(e)(f"case {label}: {e}")
    if first is None:
        return
    if passed == 0:
        raise first
    credit.fail_cases(passed, len(cases), first)
