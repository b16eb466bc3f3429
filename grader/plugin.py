"""The pytest plugin that turns check outcomes into scored results.

It runs inside the trusted process. For each test marked `@pytest.mark.check(id)` it looks up
the registry row, skips it (status not_run, with the reason) when its exercise or layer was not
selected or cannot run here, and after the test maps the outcome to a status:

    passed            the test passed (a partial `credit` may lower the score)
    failed            an assertion failed: the student's answer is wrong
    not_implemented   the student code raised NotImplementedError (a stub)
    error             the student code raised, was not submitted, or returned something unreadable
    timeout           a call into student code ran past its limit
    crashed           the worker died (segfault, os._exit, illegal memory access)
    not_run           the layer or exercise cannot run here, or was not selected
"""

from __future__ import annotations

import time

import pytest

from grader import errors
from grader.environment import Environment
from grader.registry import EXERCISES, Check
from grader.results import NOT_SELECTED, PARALLEL, Credit, Result, Selection
from grader.sandbox import calllog


PLUGIN_KEY = pytest.StashKey["GradePlugin"]()


class GradePlugin:
    """Fixtures reach it through `config.stash[PLUGIN_KEY]`."""

    def __init__(self, checks: dict[str, Check], selection: Selection, env: Environment, workers):
        self.stopped = False   # pytest ended early (interrupted): grader.run says so per check
        self.checks = checks
        self.selection = selection
        self.env = env
        self.workers = workers
        self.results: dict[str, Result] = {}
        self.pending_replays: dict[str, list] = {}   # nodeid -> replays deferred to its end
        self.layer_seconds: dict[str, float] = {}
        self.credits: dict[str, Credit] = {}
        self.device_info: dict = {}   # filled by the `gpu` fixture: name, SMs, ceilings ...
        self._started: dict[str, float] = {}
        self._stubbed: dict[str, str] = {}   # exercise -> why its perf checks are not run ("": run)

    # ------------------------------------------------------------------ collection

    def pytest_configure(self, config):
        config.stash[PLUGIN_KEY] = self
        config.addinivalue_line("markers", "check(id): the registry row this test grades")

    def pytest_collection_modifyitems(self, session, config, items):
        for item in items:
            check = self.check_of(item)
            reason = self.reason_not_run(check)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))

    def check_of(self, item) -> Check:
        marker = item.get_closest_marker("check")
        if marker is None or not marker.args:
            raise pytest.UsageError(f"{item.nodeid} has no @pytest.mark.check(id)")
        check_id = marker.args[0]
        if check_id not in self.checks:
            raise pytest.UsageError(f"{item.nodeid}: check {check_id!r} is not in the registry")
        return self.checks[check_id]

    def reason_not_run(self, check: Check) -> str | None:
        sel = self.selection
        if check.exercise not in sel.exercises:
            return NOT_SELECTED
        if sel.only_checks and check.id not in sel.only_checks:
            return "check not selected (--checks)"
        if (check.exercise, check.layer) in sel.elsewhere:
            return PARALLEL
        if check.layer not in sel.layers:
            return sel.layer_reasons.get(check.layer, "layer not selected")
        return self.env.why_not(EXERCISES[check.exercise].needs)

    # ------------------------------------------------------------------ running

    @pytest.hookimpl(tryfirst=True)   # before its fixtures: a GPU context, ceilings, workers
    def pytest_runtest_setup(self, item):
        """A perf check of an exercise whose every other check met a NotImplementedError is
        not run: it would time the functions those checks found missing, and it would pay a
        worker, a profiler and the grader's baselines to learn it again."""
        check = self.check_of(item)
        calllog.check = check.id
        if check.layer == "perf" and self.reason_not_run(check) is None:   # a skip stays a skip
            why = self.stubbed(check.exercise)
            if why:
                raise errors.NotImplementedByStudent(why)

    def stubbed(self, exercise: str) -> str:
        """Why the exercise's perf checks are not run, or "": every check of it on the other
        layers that ran, here and in the parallel processes (waited for), ended in a
        NotImplementedError, and at least one ran. One that passed, failed or crashed, on any
        layer, and the perf checks run: they are decided by the same results every time."""
        if exercise not in self._stubbed:
            try:
                elsewhere = dict(self.selection.elsewhere_results())
            except Exception:   # noqa: BLE001 - a parallel part that failed: run the perf checks
                elsewhere = {}
            mine = [r for r in {**elsewhere, **self.results}.values()
                    if r.check.exercise == exercise and r.check.layer != "perf"
                    and r.status != "not_run"]
            stub = bool(mine) and all(r.status == "not_implemented" for r in mine)
            self._stubbed[exercise] = (
                f"not timed: every check of {exercise} that ran on the other layers met a "
                f"NotImplementedError, so there is nothing to time yet") if stub else ""
        return self._stubbed[exercise]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        self._started[item.nodeid] = time.perf_counter()
        outcome = yield
        # the replays of the check's gated calls (grader.judge.provenance), once it is over and
        # only if it earned something: a failed replay fails the check as its own failure would
        pending = self.pending_replays.pop(item.nodeid, [])
        if outcome.excinfo is None:
            for replay in pending:
                try:
                    replay()
                except BaseException as e:   # noqa: BLE001 - reported as the check's outcome
                    outcome.force_exception(e)
                    break

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        check = self.check_of(item)
        if report.when == "setup" and report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            reason = reason.removeprefix("Skipped: ")
            self.results[check.id] = Result(check, "not_run", 0.0, reason)
        elif report.when == "setup" and report.failed:
            self.results[check.id] = self._from_exception(check, call.excinfo)
        elif report.when == "call":
            if report.passed:
                credit = self.credits.get(item.nodeid, Credit())
                status = "passed" if credit.fraction >= 1.0 else "failed"
                self.results[check.id] = Result(check, status, round(check.points * credit.fraction, 3),
                                                credit.note, failure_hint=getattr(credit, "hint", ""))
            elif report.skipped:
                reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
                self.results[check.id] = Result(check, "not_run", 0.0, reason.removeprefix("Skipped: "))
            else:
                self.results[check.id] = self._from_exception(check, call.excinfo)
            result = self.results[check.id]
            result.duration_s = time.perf_counter() - self._started.get(item.nodeid, time.perf_counter())
            self.layer_seconds[check.layer] = self.layer_seconds.get(check.layer, 0.0) + result.duration_s
            result.output = self._drain_outputs()

    def _from_exception(self, check: Check, excinfo) -> Result:
        e = excinfo.value if excinfo else None
        if isinstance(e, errors.StudentProblem):
            return Result(check, e.status, 0.0, str(e), failure_hint=_error_hint(e))
        if isinstance(e, AssertionError):
            message = str(e).split("\nassert ")[0].strip() or "assertion failed"
            return Result(check, "failed", 0.0, message, failure_hint=getattr(e, "hint", ""),
                          failure_follows=getattr(e, "follows", None),
                          secondary=bool(getattr(e, "secondary", False)))
        if excinfo is not None and excinfo.typename == "Failed" and "Timeout" in str(e):
            return Result(check, "timeout", 0.0, f"the check ran past the grader's limit: {e}")
        # the grader's machinery (errors.GraderError: no sandbox, a worker that could not start)
        # or a defect in the grader itself: say so plainly, never a traceback, never a hint
        cause = str(e) if isinstance(e, errors.GraderError) else f"{type(e).__name__}: {e}"
        return Result(check, "error", 0.0,
                      f"grader error ({cause}); this is not your code's fault: please report it to "
                      f"the course staff", grader_error=True)

    def _drain_outputs(self) -> str:
        texts = []
        for sub in self.workers.all():
            texts += sub.outputs
            sub.outputs.clear()
        return "\n".join(texts)[-2000:]

    def pytest_sessionfinish(self, session, exitstatus):
        self.workers.close()


def _error_hint(e: Exception) -> str:
    """For an exception raised inside a Triton kernel, the hint is Triton's own complaint (its
    evidence: the kernel could not run), not the check's idea."""
    text = str(e)
    if not isinstance(e, errors.StudentRaised) or "InterpreterError" not in text and \
            "CompilationError" not in text:
        return ""
    import re

    found = re.search(r"(?:InterpreterError|CompilationError):? ?([^\n]*)", text)
    what = (found.group(1) if found else "").strip()[:200]
    return (f"Triton could not run your kernel: {what}. Fix what it names at the line shown; "
            f"the check's own idea comes after.")

