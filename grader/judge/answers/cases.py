"""Running a check's cases given as callables: `compare.Cases`, the one case runner, over a list.

    run_cases(credit, [("float16 (5, 781) [seed 42]", lambda: ...), ...])
"""

from __future__ import annotations

from grader.judge.answers.compare import Cases


def run_cases(credit, cases: list) -> None:
    """cases: [(label, callable)]; label names the case (shape, dtype, seed). Scored as
    compare.Cases scores its cases."""
    runner = Cases(credit)
    for label, run in cases:
        with runner.case(label):
            run()
    runner.finish()
