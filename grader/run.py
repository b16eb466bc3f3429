"""grade(): run the checks of one submission and return the scored results.

The checks are pytest tests (grader/exercises/<exercise>/test_*.py, plus hidden_tests/<exercise>/
when present)
run in this process by `pytest.main` with `grader.plugin.GradePlugin`; student code runs only
in the workers that the checks reach through `grader.sandbox.proxy`.

pytest here loads no plugin by itself (no entry-point autoload, no conftest.py, no cache) and
imports the check files without putting their folders on sys.path (--import-mode=importlib):
what runs in this process is the grader, its checks and the plugins named below, nothing else.
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

from grader import options, registry
from grader.environment import Environment, detect
from grader import parallel, schedule
from grader.plugin import GradePlugin
from grader.registry import EXERCISES, HIDDEN_DIR, LAYERS, ROOT, check_files
from grader.results import GradeReport, Result, Selection
from grader.sandbox import calllog
from grader.sandbox.workers import Workers

CHECK_TIMEOUT_S = 900   # backstop per check; calls into student code have their own limits
GPU_LAYERS = ("gpu", "perf")
PLUGINS = ["grader.fixtures", "pytest_timeout"]   # named, since entry points are not loaded

# progress(check, done, total): called before each selected check runs (see grader.cli)
Progress = Callable[[registry.Check, int, int], None]


def layers_of(checks, exercises) -> set[str]:
    """The layers that hold at least one check of these exercises."""
    return {c.layer for c in checks.values() if c.exercise in exercises}


def select_layers(env: Environment, wanted: list[str] | None,
                  relevant: set[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """Layers to run, and the reason for each one that does not.

    Only layers that hold checks of the selected exercises (`relevant`) are mentioned; a layer
    left out by the command gets the short reason "not selected", or the reason it could not
    run here anyway when that is known (CUDA is probed only when a GPU layer is asked for)."""
    run, not_run = [], {}
    for name in LAYERS:
        if relevant is not None and name not in relevant:
            continue
        reason = env.layer_reason(name)
        if wanted is not None and name not in wanted:
            looked = "cuda" not in LAYERS[name].needs or "cuda" in env.have or env.cuda_probed
            not_run[name] = reason if reason and looked else "not selected"
        elif reason:
            not_run[name] = reason
        else:
            run.append(name)
    return run, not_run


def grade(submission: Path, exercises: list[str] | None = None, layers: list[str] | None = None,
          include_hidden: bool = True, only_checks: list[str] | None = None,
          progress: Progress | None = None,
          target: str | None = None, kernels: str | None = None,
          compiled: str | None = None) -> GradeReport:
    """Grade `submission` with this process's options (grader.options.current: the isolation
    level, the grading processes, the seed ...).
    `target`: a grading target's name ("gb10", grader.judge.machine.target.lookup; the CLI reads
    --target or GRADER_TARGET): every Triton kernel launched on CUDA is also compiled for it and
    checked against its shared memory (report.target), and the perf layer sweeps its tiles.
    `kernels`: the kernel cache of the grade this one is a part of (grader.parallel); by
    default the run opens its own (grader.sandbox.kernel_cache). `compiled`: that grade's
    bytecode folder, likewise (grader.sandbox.bytecode)."""
    from grader.judge.machine import target as targets
    from grader.sandbox import bytecode, kernel_cache

    target_profile = targets.lookup(target)   # UnknownTarget for a bad name, before anything runs
    gpu = layers is None or bool(set(GPU_LAYERS) & set(layers))
    with kernel_cache.for_run(kernels, wanted=gpu), bytecode.for_run(compiled, wanted=gpu):
        return _grade(submission, exercises, layers, include_hidden, only_checks,
                      progress, target, target_profile)


def _grade(submission, exercises, layers, include_hidden, only_checks, progress,
           target, target_profile) -> GradeReport:
    from grader.judge.machine import target as targets

    start = time.perf_counter()
    submission = Path(submission).resolve()
    exercises = exercises or list(EXERCISES)
    if only_checks:
        exercises = [e for e in exercises if any(c.split(".")[0] == e for c in only_checks)]
    hidden = include_hidden and HIDDEN_DIR.is_dir()
    checks = registry.all_checks(include_hidden=hidden)
    relevant = layers_of(checks, exercises)
    # torch is imported here only to ask about a GPU, and only when a selected check needs one
    wants_gpu = bool(relevant & set(GPU_LAYERS)) and (layers is None or bool(set(GPU_LAYERS) & set(layers)))
    env = detect(want_cuda=wants_gpu and not options.current().no_cuda)
    layers_run, layers_not_run = select_layers(env, layers, relevant)
    # the CPU layers of several exercises side by side, one grading process per core
    # (grader.parallel), and on a machine with cores to spare beside the GPU layers, which
    # run here, one check at a time (their workers are the only ones on the GPU); or, with CUDA
    # and cores to spare, the untimed gpu checks in those processes too, and the timed ones
    # here after them, the GPU alone
    plan = schedule.split_plan(exercises, layers_run, checks, "cuda" in env.have, target_profile)
    jobs = schedule.jobs_for(exercises, sorted({name for ls in plan.values() for name in ls}))
    split = plan if jobs > 1 else {}
    elsewhere = frozenset((e, name) for e, ls in split.items() for name in ls)
    here = [name for name in layers_run
            if any((c.exercise, name) not in elsewhere for c in checks.values()
                   if c.layer == name and c.exercise in exercises)]
    gpu_split = any(schedule.GPU_SPLIT in ls for ls in split.values())
    counter = ProgressCount(progress)
    # with cores to spare the CPU layers go on beside everything on the GPU (their workers see
    # none): in a thread of their own through the untimed gpu checks and the timed ones after
    beside = bool(split) and bool(here) and schedule.may_overlap()
    cpu_plan, gpu_plan = schedule.divide(split) if beside and gpu_split else (split, {})
    # on a GPU box, time first: the checks here (the timed ones) with nothing else running,
    # then the grading processes beside their held-back verification (schedule.timed_first)
    timed_first = schedule.timed_first(gpu_plan, here, layers_run, env.gpu_bytes, env.gpu_unified,
                                         target_profile)
    cpu_jobs = schedule.beside_jobs(jobs) if gpu_plan else jobs
    gpu_requests = sum(1 for c in checks.values() if c.layer == schedule.GPU_SPLIT
                       and c.exercise in gpu_plan and (not only_checks or c.id in only_checks))
    gpu_jobs = schedule.gpu_jobs(gpu_requests, cpu_jobs)
    if timed_first:   # nothing is timed any more: the cores the gpu checks' processes leave
        cpu_jobs = schedule.after_timing_jobs(cpu_jobs, gpu_jobs)
    cpu_part = parallel.Background(lambda: parallel.grade_cpu_layers(
        submission, cpu_plan, cpu_jobs, checks, hidden, only_checks, target, counter.cpu,
        by_layer=timed_first))
    gpu_part = parallel.Background(lambda: parallel.grade_cpu_layers(
        submission, gpu_plan, gpu_jobs, checks, hidden, only_checks, target, counter.gpu))

    def start_parts() -> None:
        if cpu_plan:
            cpu_part.start()
        if gpu_plan:
            gpu_part.start()

    if not timed_first:
        if cpu_plan and beside:
            cpu_part.start()
        elif cpu_plan:
            cpu_part.run()
        if gpu_plan:
            gpu_part.run()
    # a check graded in a parallel process is skipped here by its (exercise, layer): `elsewhere`
    selection = Selection(exercises, here, layers_not_run, only_checks, elsewhere)
    workers = Workers(submission)
    plugin = GradePlugin(checks, selection, env, workers)
    plugin.target = targets.Evidence(target_profile) if target_profile else None   # fixtures read it
    plugin.deferring, plugin.after_timed = timed_first, start_parts
    notes = []
    try:
        if here:
            notes += _run_pytest(plugin, workers, exercises, hidden,
                                 counter.here if progress else None)
        else:
            workers.close()
    finally:
        if timed_first:
            start_parts()   # (started already, unless pytest stopped before its end)
    parts = [part.result() for part, plan in ((cpu_part, cpu_plan), (gpu_part, gpu_plan)) if plan]
    elsewhere_results, seconds, more, levels = parallel.merge(parts)
    notes += more
    if cpu_plan and cpu_part.started and not timed_first:
        notes.append(f"The CPU layers ran beside the GPU layers, in {cpu_jobs} grading processes "
                     f"of their own; none of their workers can see a GPU.")
    if timed_first:   # (only where no untimed gpu check runs here: schedule.timed_first)
        notes.append(schedule.timed_first_note(gpu_jobs, cpu_jobs, gpu_plan, cpu_plan))
    elif gpu_split:
        notes.append(f"The gpu layer's untimed checks ran in {gpu_jobs} "
                     f"grading processes side by side; the timed checks ran after them, with the "
                     f"GPU alone.")
    for name, s in seconds.items():
        plugin.layer_seconds[name] = round(plugin.layer_seconds.get(name, 0.0) + s, 2)
    plugin.device_info = plugin.device_info or levels.get("device_info") or {}

    results = [elsewhere_results.get(c.id) or plugin.results.get(c.id) or _missing(c, selection, env, plugin)
               for c in checks.values() if c.exercise in EXERCISES]
    report = GradeReport(str(_relative(submission)), env.device, results,
                         round(time.perf_counter() - start, 2), layers_run, layers_not_run,
                         plugin.layer_seconds, notes, plugin.device_info, timed_first=timed_first)
    # the level the workers ran at
    report.isolation = (getattr(workers, "isolation", "") if here else "") or levels.get("isolation", "")
    # and what the kernel denied them (grader.worker.seccomp), per mode
    report.seccomp = parallel.join_levels({**levels.get("seccomp", {}),
                                           **parallel.parse_levels(getattr(workers, "seccomp", ""))})
    if plugin.target is not None:
        report.target = plugin.target.to_dict(plugin.device_info.get("name") or env.device)
    # the grade's own span in the call log (its start: end - s), a part's too
    calllog.record("grade", exercises[0] if len(exercises) == 1 else "", "trusted",
                   time.perf_counter() - start, check="")
    return report


def _run_pytest(plugin: GradePlugin, workers: Workers, exercises: list[str], hidden: bool,
                progress: Progress | None) -> list[str]:
    """Run the selected checks in this process; the notes of a run that stopped early. Every
    worker is stopped when it returns."""
    files = [str(p) for e in exercises for p in check_files(e)]
    if hidden:
        files += [str(p) for e in exercises for p in check_files(e, hidden=True)]
    args = [*files, "-c", str(ROOT / "grader" / "pytest.ini"), "--rootdir", str(ROOT),
            "--import-mode=importlib", "--noconftest",
            *(a for p in PLUGINS for a in ("-p", p)), "-p", "no:cacheprovider",
            "-q", "--no-header", "-rN", f"--timeout={CHECK_TIMEOUT_S}"]
    plugins = [plugin] + ([ProgressPlugin(plugin, progress)] if progress else [])
    log = io.StringIO()
    notes = []
    autoload = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        with contextlib.redirect_stdout(log):
            code = pytest.main(args, plugins=plugins)
        if code not in (0, 1, 5):   # 2-4: interrupted, internal or usage error
            notes.append(f"pytest stopped early (exit {int(code)}): {log.getvalue()[-800:]}")
            plugin.stopped = True
    finally:
        workers.close()
        if autoload is None:
            os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    return notes


class ProgressCount:
    """One count of checks for the progress display, from this process's checks and the
    parallel processes' (grader.parallel), which may report at the same time."""

    def __init__(self, progress: Progress | None):
        self.progress = progress
        self.lock = threading.Lock()
        self.done = {"here": 0, "cpu": 0, "gpu": 0}
        self.total = {"here": 0, "cpu": 0, "gpu": 0}

    def _report(self, part: str, check, done: int, total: int) -> None:
        if self.progress is None:
            return
        with self.lock:
            self.done[part], self.total[part] = done, total
            self.progress(check, sum(self.done.values()), sum(self.total.values()))

    def here(self, check, done: int, total: int) -> None:
        self._report("here", check, done, total)

    def cpu(self, check, done: int, total: int) -> None:
        """The CPU layers' grading processes."""
        self._report("cpu", check, done, total)

    def gpu(self, check, done: int, total: int) -> None:
        """The untimed gpu checks' grading processes."""
        self._report("gpu", check, done, total)


class ProgressPlugin:
    """Tells `progress` which check is about to run, and how many of the selected ones ran."""

    def __init__(self, grading: GradePlugin, progress: Progress):
        self.grading = grading
        self.progress = progress
        self.items: dict[str, registry.Check] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        for item in items:
            if not item.get_closest_marker("skip"):
                with contextlib.suppress(Exception):
                    self.items[item.nodeid] = self.grading.check_of(item)

    def pytest_runtest_logstart(self, nodeid, location):
        if nodeid in self.items:
            done = list(self.items).index(nodeid)
            with contextlib.suppress(Exception):
                self.progress(self.items[nodeid], done, len(self.items))


def _missing(check, selection: Selection, env: Environment, plugin: GradePlugin) -> Result:
    """A registry row with no outcome: not selected, cannot run here, or never collected."""
    reason = plugin.reason_not_run(check)
    if reason:
        return Result(check, "not_run", 0.0, reason)
    why = ("the grading run stopped before this check ran" if plugin.stopped
           else "this check did not run (no test found or collection failed)")
    return Result(check, "error", 0.0, f"grader error ({why}); this is not your code's fault: "
                                       f"please report it to the course staff", grader_error=True)


def _relative(path: Path) -> Path:
    with contextlib.suppress(ValueError):
        return path.relative_to(Path(os.getcwd()))
    return path
