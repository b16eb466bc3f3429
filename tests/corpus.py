"""Shared by the corpus tests (mutants, cheats, wrong, variants, solutions and stubs): grade one
exercise of a submission made from solutions/ with some files replaced, and read the report.

Every corpus case is graded on its whole exercise, never on hand-picked checks: a mistake must
lose the points of the check aimed at it and a cheat must lose everything, whatever else the
grader does with that exercise. What the corpora are and where they live: tests/cases.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

from grader.registry import EXERCISES as REGISTERED, all_checks
from tests.cases import folder_files
from tests.helpers import CPU_LAYERS, EXERCISES, ROOT, SOLUTIONS, copy_solutions, grade

CPU = tuple(CPU_LAYERS.split(","))


# the extension track's exercises (tests/test_extension_track.py, test_solutions_and_stubs.py),
# the hidden checks each one's full-marks grade must include, and the CPU layers it has where
# those are not all three (a NumPy-only exercise has no interp checks)
EXTENSION = sorted(e.name for e in REGISTERED.values() if e.track == "extension")
EXTENSION_HIDDEN = {
    "flash_decode": {"flash_decode.hidden_shapes", "flash_decode.hidden_merge"},
    "attention_backward": {"attention_backward.hidden_shapes", "attention_backward.inputs_untouched"},
    "flash_backward": {"flash_backward.hidden_shapes"},
    "io_model": {"io_model.hidden_shapes"},
    "softmax_long": {"softmax_long.hidden_shapes", "softmax_long.output_written"}}
EXTENSION_LAYERS = {"attention_backward": "cpu,adversarial", "flash_backward": "adversarial,interp",
                    "io_model": "cpu,adversarial", "softmax_long": "adversarial,interp"}


def cpu_layers(exercise: str) -> str:
    """The CPU layers the exercise has checks on: cpu,adversarial for NumPy and bench_attn,
    adversarial,interp for Triton (read from the registry, so a new layer of checks counts)."""
    layers = {c.layer for c in all_checks().values() if c.exercise == exercise}
    return ",".join(layer for layer in CPU if layer in layers)


def grade_exercise(tmp_path: Path, exercise: str, files: dict[str, str], layers: str | None = None,
                   hidden: bool = True, audit: bool = True, replay: bool = True) -> dict:
    """solutions/ with `files` ({file name: text}) put in its place, graded on `exercise` only
    (`audit=False`, `replay=False`: with that part of the grader off, tests.helpers.grader_command)."""
    sub = copy_solutions(tmp_path / "sub", files)
    args = ["--exercises", exercise, "--layers", layers or cpu_layers(exercise)]
    if not hidden:
        args.append("--no-hidden")
    return grade(sub, *args, audit=audit, replay=replay)


def checks_of(report: dict, exercise: str) -> list[dict]:
    """The checks of `exercise` that ran."""
    return [t for t in report["tests"] if t["exercise"] == exercise and t["status"] != "not_run"]


def losing(report: dict, exercise: str) -> list[dict]:
    """The checks of `exercise` that ran and lost points."""
    return [t for t in checks_of(report, exercise) if t["score"] < t["max_score"]]


def exercise_score(report: dict, exercise: str) -> tuple[float, float]:
    ran = checks_of(report, exercise)
    return round(sum(t["score"] for t in ran), 3), round(sum(t["max_score"] for t in ran), 3)


def line(t: dict) -> str:
    """One check of a report, for assertion messages."""
    hint = f" | hint: {t['hint']}" if t.get("hint") else ""
    return (f"{t['name']} [{t['layer']}] {t['status']} {t['score']:g}/{t['max_score']:g}: "
            f"{(t['message'] or '')[:300]}{hint[:200]}")


def lines(tests: list[dict]) -> str:
    return "\n".join(line(t) for t in tests)


def without_raises(source: str) -> str:
    """A stub with each `raise NotImplementedError(...)` statement replaced by `pass` (deleted, as
    a student would, but keeping every block non-empty): the code around it still runs."""
    tree = ast.parse(source)
    spans = [(n.lineno, n.end_lineno, n.col_offset) for n in ast.walk(tree)
             if isinstance(n, ast.Raise) and n.exc is not None
             and "NotImplementedError" in ast.unparse(n.exc)]
    assert spans, "the stub has no raise NotImplementedError"
    text = source.splitlines(keepends=True)
    for start, end, col in sorted(spans, reverse=True):
        text[start - 1:end] = [" " * col + "pass\n"]
    return "".join(text)


__all__ = ["CPU", "EXERCISES", "ROOT", "SOLUTIONS", "cpu_layers", "grade_exercise", "folder_files",
           "checks_of", "losing", "exercise_score", "line", "lines", "without_raises"]
