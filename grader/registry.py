"""The one table: exercises, layers, checks, points and hints.

Every exercise is a folder, grader/exercises/<name>/, whose rows.py holds its `EXERCISE` row and
its public `CHECKS` (grader.schema's types); this module gathers them, in the lesson's order
(`Exercise.order`), and names no exercise itself. Every graded check is a pytest test marked
`@pytest.mark.check("<id>")` whose id is a row; the pytest plugin (`grader.plugin`) looks the row
up for points, layer and hint. Nothing about scoring is written anywhere else. The core track's
public checks add up to 100 points (`public_total()`); extension-track exercises
(`Exercise.track`) add points of their own (`public_total("extension")`). Instructor-only checks
come from hidden_tests/<name>/rows.py, marked hidden, when that folder is present.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from pathlib import Path

from grader.schema import Check, Exercise, Layer  # noqa: F401 - the row types, for callers

ROOT = Path(__file__).resolve().parent.parent
EXERCISES_DIR = ROOT / "grader" / "exercises"
HIDDEN_DIR = ROOT / "hidden_tests"

LAYERS = {l.name: l for l in [
    Layer("cpu", "NumPy and CPU numerics", frozenset()),
    Layer("adversarial", "Break It cases", frozenset()),
    Layer("interp", "Triton kernels under the interpreter", frozenset({"torch", "triton"})),
    Layer("gpu", "Correctness at real sizes on the GPU", frozenset({"torch", "triton", "cuda"})),
    Layer("perf", "Speed and memory against PyTorch", frozenset({"torch", "triton", "cuda"})),
]}


def exercise_dirs(base: Path = EXERCISES_DIR) -> list[Path]:
    """The exercise folders under `base`: each holds a rows.py."""
    return sorted(p.parent for p in base.glob("*/rows.py"))


def _gather() -> tuple[dict[str, Exercise], list[Check]]:
    modules = [importlib.import_module(f"grader.exercises.{d.name}.rows") for d in exercise_dirs()]
    modules.sort(key=lambda m: (m.EXERCISE.order, m.EXERCISE.name))
    for m in modules:
        wrong = [c.id for c in m.CHECKS if c.exercise != m.EXERCISE.name]
        if wrong:
            raise ValueError(f"{m.__name__}: checks of another exercise: {wrong}")
        paid = [c.id for c in m.CHECKS if c.advice and c.points]
        if paid:
            raise ValueError(f"{m.__name__}: advice checks are worth 0 points: {paid}")
    return {m.EXERCISE.name: m.EXERCISE for m in modules}, [c for m in modules for c in m.CHECKS]


EXERCISES, CHECKS = _gather()


def check_files(exercise: str, hidden: bool = False) -> list[Path]:
    """The check modules of one exercise (test_*.py in its folder, or in hidden_tests/<name>/)."""
    folder = (HIDDEN_DIR if hidden else EXERCISES_DIR) / exercise
    order = list(LAYERS)   # test_cpu.py, test_adversarial.py, ... run in the layers' order
    return sorted(folder.glob("test_*.py"), key=lambda p: (
        order.index(p.stem[5:]) if p.stem[5:] in order else len(order), p.name))


def exercise_module(exercise: str, name: str):
    """An exercise folder's public module (`reference`, `mistakes`, `bench`, `kernel`): what
    shared code, hidden checks and tools may import of an exercise; never a check module."""
    return importlib.import_module(f"grader.exercises.{exercise}.{name}")


def hidden_checks() -> list[Check]:
    """Rows declared by hidden_tests/<exercise>/rows.py, when the instructor's folder is present."""
    rows = []
    for name in EXERCISES:
        path = HIDDEN_DIR / name / "rows.py"
        if path.exists():
            spec = importlib.util.spec_from_file_location(f"hidden_rows_{name}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            rows += [dataclasses.replace(c, hidden=True) for c in module.CHECKS]
    return rows


def all_checks(include_hidden: bool = True) -> dict[str, Check]:
    rows = CHECKS + (hidden_checks() if include_hidden else [])
    return {c.id: c for c in rows}


def public_total(track: str = "core") -> float:
    """Points of the public checks of one track: the core's are 100, the extension's its own."""
    return sum(c.points for c in CHECKS if EXERCISES[c.exercise].track == track)
