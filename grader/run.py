"""grade(): run the checks of one submission and return the scored results.

The checks are pytest tests (grader/checks/test_<exercise>.py, plus hidden_tests/ when present)
run in this process by `pytest.main` with `grader.plugin.GradePlugin`; student code runs only
in the workers that the checks reach through `grader.sandbox.launcher`.
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from pathlib import Path

from grader import registry
from grader.environment import Environment, detect
from grader.plugin import GradePlugin
from grader.registry import EXERCISES, LAYERS, ROOT
from grader.results import GradeReport, Result, Selection
from grader.sandbox.launcher import Workers

CHECKS_DIR = ROOT / "grader" / "checks"
HIDDEN_DIR = ROOT / "hidden_tests"
CHECK_TIMEOUT_S = 900   # backstop per check; calls into student code have their own limits


def select_layers(env: Environment, wanted: list[str] | None) -> tuple[list[str], dict[str, str]]:
    """Layers to run, and the reason for each one that does not."""
    run, not_run = [], {}
    for name in LAYERS:
        reason = env.layer_reason(name)
        if wanted is not None and name not in wanted:
            # say why it could not run anyway (no triton...), but only if that was looked at:
            # CUDA is probed only when a GPU layer is asked for
            looked = "cuda" not in LAYERS[name].needs or "cuda" in env.have or env.cuda_probed
            hint = "; `make grade-gpu` runs every layer" if "cuda" in LAYERS[name].needs else ""
            not_run[name] = reason if reason and looked else f"not selected (--layers){hint}"
        elif reason:
            not_run[name] = reason
        else:
            run.append(name)
    return run, not_run


def grade(submission: Path, exercises: list[str] | None = None, layers: list[str] | None = None,
          include_hidden: bool = True, only_checks: list[str] | None = None) -> GradeReport:
    import pytest

    start = time.perf_counter()
    submission = Path(submission).resolve()
    exercises = exercises or list(EXERCISES)
    if only_checks:
        exercises = [e for e in exercises if any(c.split(".")[0] == e for c in only_checks)]
    wants_gpu = layers is None or bool({"gpu", "perf"} & set(layers))
    env = detect(want_cuda=wants_gpu)
    layers_run, layers_not_run = select_layers(env, layers)
    hidden = include_hidden and HIDDEN_DIR.is_dir()
    checks = registry.all_checks(include_hidden=hidden)
    selection = Selection(exercises, layers_run, layers_not_run, only_checks)
    workers = Workers(submission)
    plugin = GradePlugin(checks, selection, env, workers)

    files = [str(CHECKS_DIR / f"test_{e}.py") for e in exercises if (CHECKS_DIR / f"test_{e}.py").exists()]
    if hidden:
        files += [str(p) for e in exercises for p in sorted(HIDDEN_DIR.glob(f"test_{e}*.py"))]
    args = [*files, "-c", str(ROOT / "grader" / "pytest.ini"), "--rootdir", str(ROOT),
            "-p", "grader.fixtures", "-p", "no:cacheprovider", "-p", "no:randomly",
            "-q", "--no-header", "-rN", f"--timeout={CHECK_TIMEOUT_S}"]
    log = io.StringIO()
    notes = []
    try:
        with contextlib.redirect_stdout(log):
            code = pytest.main(args, plugins=[plugin])
        if code not in (0, 1, 5):   # 2-4: interrupted, internal or usage error
            notes.append(f"pytest stopped early (exit {int(code)}): {log.getvalue()[-800:]}")
    finally:
        workers.close()

    results = [plugin.results.get(c.id) or _missing(c, selection, env, plugin)
               for c in checks.values() if c.exercise in EXERCISES]
    return GradeReport(str(_relative(submission)), env.device, results,
                       round(time.perf_counter() - start, 2), layers_run, layers_not_run,
                       plugin.layer_seconds, notes, plugin.device_info, workers.isolation)


def _missing(check, selection: Selection, env: Environment, plugin: GradePlugin) -> Result:
    """A registry row with no outcome: not selected, cannot run here, or never collected."""
    reason = plugin.reason_not_run(check)
    if reason:
        return Result(check, "not_run", 0.0, reason)
    return Result(check, "error", 0.0, "grader error: this check did not run (no test found or "
                                       "collection failed); please report this to the course staff")


def _relative(path: Path) -> Path:
    with contextlib.suppress(ValueError):
        return path.relative_to(Path(os.getcwd()))
    return path
