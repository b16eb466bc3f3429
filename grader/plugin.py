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

import threading
import time

import pytest

from grader import errors
from grader.environment import Environment
from grader.registry import EXERCISES, Check
from grader.judge.answers.compare import CheckFailed, as_secondary
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
        # nodeid -> its gated calls' replays, run at its end (or begun at once: ReplaysInThread)
        self.pending_replays: dict[str, Replays] = {}
        # nodeid -> the check's work after its timing (`after_timing`: verification, gated calls),
        # run at its end; or, while `deferring` (grader.run times every perf check first), after
        # the last check, beside the untimed checks that `after_timed()` starts
        self.pending_after_timing: dict[str, list] = {}
        self.deferring = False
        self.after_timed = None
        self._deferred: list[str] = []   # nodeids of the checks whose verdict waits for it
        self.layer_seconds: dict[str, float] = {}
        self.credits: dict[str, Credit] = {}
        self.device_info: dict = {}   # filled by the `gpu` fixture: name, SMs, ceilings ...
        self._started: dict[str, float] = {}
        self._stubbed: dict[str, str] = {}   # exercise -> why its perf checks are not run ("": run)
        self._checks_by_node: dict[str, Check] = {}
        self._lock = threading.Lock()   # deferred checks settle side by side (_settle_all)

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
        """A perf check of an exercise whose graded functions are all still the stub is not
        run: it would time functions that can only raise, and pay a worker, a profiler and the
        grader's baselines to learn it."""
        check = self.check_of(item)
        calllog.check = check.id
        if check.layer == "perf" and self.reason_not_run(check) is None:   # a skip stays a skip
            why = self.stubbed(check.exercise)
            if why:
                raise errors.NotImplementedByStudent(why)

    def stubbed(self, exercise: str) -> str:
        """Why the exercise's perf checks are not run, or "": every function they time
        (Exercise.timed, else the kernel-use gate's Exercise.kernels) still begins with the
        stub's `raise NotImplementedError` in the submission's file (grader.judge.source.still_stub).
        Read from the source, so it is known before any of the exercise's other checks ran:
        the perf checks may run first (grader.run). One function written, and they run."""
        if exercise not in self._stubbed:
            from grader.judge.source.still_stub import still_stubs

            names = list(EXERCISES[exercise].timed or EXERCISES[exercise].kernels)
            directory = (getattr(self.workers, "sources", None)
                         or getattr(self.workers, "directory", None))
            stubs = still_stubs(directory / f"{exercise}.py", names) if names and directory else []
            self._stubbed[exercise] = (
                f"not timed: {' and '.join(stubs)} still "
                f"{'raise' if len(stubs) > 1 else 'raises'} NotImplementedError first (the "
                f"stub), so there is nothing to time yet") if stubs and len(stubs) == len(names) else ""
        return self._stubbed[exercise]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        self._started[item.nodeid] = time.perf_counter()
        outcome = yield
        if outcome.excinfo is not None:   # it earned nothing: its later work and replays neither
            self.pending_after_timing.pop(item.nodeid, None)
            self.pending_replays.pop(item.nodeid, Replays()).close()
        elif self.deferring and self.pending_after_timing.get(item.nodeid):
            self._deferred.append(item.nodeid)   # its verdict waits for the timed phase's end
        else:
            try:
                self._settle(item.nodeid)
            except BaseException as e:   # noqa: BLE001 - reported as the check's outcome
                outcome.force_exception(e)

    def replays_of(self, nodeid: str, in_thread: bool = False) -> Replays:
        """Where a check's gated calls put their replays (grader.judge.evidence.kernel_use.gate): a
        list run at the check's end, or, `in_thread`, each begun at once (ReplaysInThread)."""
        if nodeid not in self.pending_replays:
            self.pending_replays[nodeid] = ReplaysInThread() if in_thread else Replays()
        return self.pending_replays[nodeid]

    def _settle(self, nodeid: str) -> None:
        """The check's later work, then the replays of its gated calls (grader.judge.evidence.provenance),
        those the later work made included: a failure there is the check's own failure."""
        for work in self.pending_after_timing.pop(nodeid, []):
            work()
        replays = self.pending_replays.pop(nodeid, Replays())
        try:
            for replay in replays:
                replay()
        finally:
            replays.close()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session):
        """While `deferring`: once every check here has run (the timed ones, with the GPU alone),
        start what `after_timed` starts (the untimed checks' grading processes), then settle the
        deferred checks, each verdict from its credit and its later work."""
        yield
        if not self.deferring:
            return
        self.deferring = False
        if self.after_timed is not None:
            self.after_timed()
        self._settle_all(self._deferred)

    def _settle_all(self, nodeids: list[str]) -> None:
        """The deferred checks, one thread per exercise (each has workers of its own, and its
        checks settle in their order); one after another where memory keeps one exercise's
        workers alive at a time (grader.sandbox.budget)."""
        from concurrent.futures import ThreadPoolExecutor

        from grader.sandbox import budget

        groups: dict[str, list[str]] = {}
        for nodeid in nodeids:
            groups.setdefault(self._checks_by_node[nodeid].exercise, []).append(nodeid)
        if len(groups) < 2 or budget.one_exercise_at_a_time():
            for nodeid in nodeids:
                self._settle_deferred(nodeid)
            return
        with ThreadPoolExecutor(max_workers=len(groups), thread_name_prefix="settle") as pool:
            for done in [pool.submit(lambda ids=ids: [self._settle_deferred(i) for i in ids])
                         for ids in groups.values()]:
                done.result()

    def _settle_deferred(self, nodeid: str) -> None:
        check = self._checks_by_node[nodeid]
        calllog.this_thread.check = check.id
        start = time.perf_counter()
        try:
            self._settle(nodeid)
            result = self._credited(check, nodeid)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:   # noqa: BLE001 - the check's outcome, as in its body
            result = self._from_error(check, e)
        spent = time.perf_counter() - start
        result.duration_s = self.results[check.id].duration_s + spent
        result.output = "\n".join(x for x in (self.results[check.id].output,
                                              self._drain_outputs(check.exercise)) if x)[-2000:]
        with self._lock:
            self.layer_seconds[check.layer] = self.layer_seconds.get(check.layer, 0.0) + spent
            self.results[check.id] = result

    def _credited(self, check: Check, nodeid: str) -> Result:
        """The result of a check whose body ran to its end: its credit."""
        credit = self.credits.get(nodeid, Credit())
        status = "passed" if credit.fraction >= 1.0 else "failed"
        return Result(check, status, round(check.points * credit.fraction, 3), credit.note,
                      undecided=credit.undecided)

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
            self._checks_by_node[item.nodeid] = check
            if report.passed:
                self.results[check.id] = self._credited(check, item.nodeid)
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
        return self._from_error(check, excinfo.value if excinfo else None,
                                excinfo.typename if excinfo is not None else "")

    def _from_error(self, check: Check, e, typename: str | None = None) -> Result:
        typename = type(e).__name__ if typename is None else typename
        if isinstance(e, errors.StudentProblem):
            return Result(check, e.status, 0.0, str(e), failure_hint=_error_hint(e),
                          file_error=isinstance(e, errors.FileProblem))
        if isinstance(e, CheckFailed) and check.evidence is not None and e.kind and \
                e.kind not in check.evidence and not e.secondary:
            e = as_secondary(e)   # a wrong answer, not this check's idea (Check.evidence)
        if isinstance(e, AssertionError):
            message = str(e).split("\nassert ")[0].strip() or "assertion failed"
            return Result(check, "failed", 0.0, message, failure_hint=getattr(e, "hint", ""),
                          failure_follows=getattr(e, "follows", None),
                          secondary=bool(getattr(e, "secondary", False)),
                          picture=getattr(e, "picture", None))
        if typename == "Failed" and "Timeout" in str(e):
            return Result(check, "timeout", 0.0, f"the check ran past the grader's limit: {e}")
        # the grader's machinery (errors.GraderError: no sandbox, a worker that could not start)
        # or a defect in the grader itself: say so plainly, never a traceback, never a hint
        cause = str(e) if isinstance(e, errors.GraderError) else f"{type(e).__name__}: {e}"
        return Result(check, "error", 0.0,
                      f"grader error ({cause}); this is not your code's fault: please report it to "
                      f"the course staff", grader_error=True)

    def _drain_outputs(self, exercise: str | None = None) -> str:
        """What the workers printed since the last drain (of one exercise's workers, or all)."""
        texts = []
        for sub in self.workers.all():
            if exercise in (None, sub.exercise):
                texts += sub.outputs
                sub.outputs.clear()
        return "\n".join(texts)[-2000:]

    def pytest_sessionfinish(self, session, exitstatus):
        self.workers.close()


class Replays(list):
    """A check's replays (grader.judge.evidence.kernel_use.gate appends them), run in order by `_settle`
    at the check's end."""

    def close(self) -> None:
        """What is left undone is dropped."""


class ReplaysInThread(Replays):
    """A check's replays, each begun as soon as its call returned, one after another in a
    thread of their own, while the check goes on with its next call; the list holds a wait for
    each one's verdict, which `_settle` runs in order at the check's end (the first failure is
    the check's). For the untimed gpu checks only (grader.fixtures.student): there a replay is
    a GPU call in another worker, beside the student's; under the interpreter it would take
    the check's own core, and nothing may run beside a timed call."""

    def __init__(self):
        from concurrent.futures import ThreadPoolExecutor

        super().__init__()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="replay")

    def append(self, replay) -> None:
        check = calllog.check

        def run():
            calllog.this_thread.check = check
            return replay()

        super().append(self._pool.submit(run).result)

    def close(self) -> None:
        """Replays not begun are dropped; the one running is waited for."""
        self._pool.shutdown(wait=True, cancel_futures=True)


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

