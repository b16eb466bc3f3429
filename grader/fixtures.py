"""Fixtures for checks (public and hidden), loaded as a pytest plugin by the runner.

    @pytest.mark.check("flash_triton.ragged_n")
    def test_ragged_n(student, rng):
        flash = student("flash_triton")        # proxy to the worker; mode from the check's layer
        out = flash.flash_fwd(q, k, v)          # decoded values, never student objects

Every submission file is audited first (grader.judge.source.audit, in this process, before any of it
runs): a flagged construct fails every check of its exercise. For the Triton exercises, `student`
returns a `ProvingSubmission` proxy: every call to the graded function proves kernel use (a
launch, no computing torch op; on CUDA no foreign device kernel and no helper process on the
GPU; under the interpreter every load/store is bounds-checked) and provenance (its recorded
program, replayed in a worker that holds only the submission's kernels, gives the same answer:
grader.judge.evidence.provenance, then again on fresh inputs against the reference:
grader.judge.evidence.moved_inputs), so no check can earn points for an answer the student's
kernel did not compute.

`rng` is a fresh NumPy generator for every check (its seed goes into failure messages so a
student can reproduce a case; --seed fixes it). `credit` gives partial credit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from grader import errors, options
from grader.judge.machine import target   # a grading target's spec and tiles (--target gb10)
from grader.judge.evidence import kernel_use   # the kernel-use gate
from grader.judge.evidence import provenance   # the replay behind it
from grader.judge.evidence import moved_inputs   # and its second replay, on fresh inputs
from grader.judge.evidence.replayed import TimedCall
from grader.plugin import PLUGIN_KEY
from grader.results import Credit
from grader.sandbox.proxy import CallResult, label
from grader.wire import checksum
from grader.registry import EXERCISES

LAYER_MODE = {"gpu": "cuda", "perf": "cuda"}   # other layers use the exercise's own mode
# False only in two repo tests, through tests.helpers.grader_command(replay=False): the mutant
# corpus (wrong answers, caught by comparison) and the steady grades (a replay compares a kernel
# with itself); the solutions, variants, wrong cases and cheats are graded with every replay
REPLAY = True


def _plugin(request):
    return request.config.stash[PLUGIN_KEY]


@dataclass
class ProvedCall(CallResult):
    """A gated call's result: the opts it ran with, and the provenance.Call its replay judges
    (None where no replay runs), so a check can judge on the replay's evidence
    (kernel_use.assert_in_bounds)."""
    opts: dict = field(default_factory=dict)
    replayed: object = None


class ProvingSubmission:
    """A Submission whose every call into a Triton exercise's graded function proves that the
    student's kernel computed the answer: traced (a launch, no computing torch op), and on CUDA
    profiled (no device kernel but the student's Triton kernels and copies) with no helper
    process on the GPU; its program replayed from the kernels alone (`replayer`). Under the
    interpreter, loads and stores are bounds-checked (grader/worker/bounds.py); the check that
    owns the masks judges what the replay recorded."""

    def __init__(self, sub, exercise: str, target=None, check_id: str = "", replayer=None,
                 pending: list | None = None):
        self._sub = sub
        # the replays of this check's calls, run when the check is over (grader.plugin)
        self._pending = pending
        # () -> (replay worker, compile worker, sources): every gated call is replayed from the
        # kernels alone (grader.judge.evidence.provenance)
        self._replayer = replayer
        self._kernels = kernel_use.KERNELS.get(exercise, {})
        # grader.judge.machine.target.Evidence when a target was asked for: on CUDA every gated call
        # also compiles its kernels for the target, and the records go there (advice, no points)
        self._target = target
        self._exercise = exercise
        self._check_id = check_id

    def __getattr__(self, name: str):
        if name in ("_sub", "_kernels", "_target", "_exercise", "_check_id", "_replayer",
                    "_pending"):
            raise AttributeError(name)
        if name in self._kernels:
            return lambda *args, **kwargs: self.call(name, *args, **kwargs).value
        return getattr(self._sub, name)

    def call(self, fn: str, *args, opts: dict | None = None, **kwargs):
        gated = fn in self._kernels
        # the perf layer's requests (grader.worker.probes.run: `runs`, `fetch`, `programs`) are
        # verified by checksums and timed; a profiler there would be timed too. Their calls'
        # programs are recorded, and those the grader picks replayed (`check_timed`)
        timed = checksum.timed_request(opts)
        if not gated or timed:
            if gated and opts.get("runs") and self.records_timed(fn):
                opts = {**opts, "runs": {**opts["runs"], "program": True}}
            return self._sub.call(fn, *args, opts=opts, **kwargs)
        opts = dict(opts or {}, trace=True, program=self._replayer is not None)
        cuda = self._sub.mode == "cuda"
        opts["kernels" if cuda else "bounds"] = True
        if cuda and self._target is not None:
            opts["target"] = target.spec(self._target.profile)
        r = self._sub.call(fn, *args, opts=opts, **kwargs)
        if cuda and self._target is not None:
            self._target.add(self._exercise, self._check_id, r.extras)
        replayed = None
        if self._replayer is not None:
            replayer, compiler, sources = self._replayer()
            replayed = provenance.Call(replayer, sources, [*args, *kwargs.values()], r.value, opts,
                                       compiler, self._moved_inputs(fn, args, kwargs))
        kernel_use.gate(r.extras, self._exercise, fn,
                        gpu_pid=self._sub.worker_pid if cuda else None, replayed=replayed,
                        defer=self._pending)
        return ProvedCall(r.value, r.stdout, r.wall_s, r.extras, opts, replayed)

    def _moved_inputs(self, fn: str, args: tuple, kwargs: dict):
        """() -> the call's fresh inputs and their reference (grader.judge.evidence.moved_inputs), made when the
        replay runs; values the student's code never sees, drawn from the OS's entropy."""
        def form():
            return moved_inputs.form_of(self._exercise, fn, args, kwargs, np.random.default_rng())
        return form

    def records_timed(self, fn: str) -> bool:
        """Whether timed calls of `fn` are recorded and their programs replayed: every kernel's,
        where the check has replays (a timed call counts only by what ran in it)."""
        return fn in self._kernels and self._replayer is not None

    def check_timed(self, fn: str, args: list, kwargs: dict, extras: dict,
                    timed: TimedCall, what: str) -> None:
        """The kernel-use gate on one timed call (grader.judge.perf.timed_requests.Requests picked
        it after the call): its trace, and its program replayed on its own inputs, judged by
        checksum."""
        replayer, compiler, sources = self._replayer()
        replayed = provenance.Call(replayer, sources, [*args, *kwargs.values()], None, {},
                                   compiler)
        kernel_use.gate(extras, self._exercise, fn, call=what, replayed=replayed, timed=timed)


def audited(plugin, exercise: str) -> None:
    """Run the static audit (grader.judge.source.audit) of the exercise's file once per run; a flagged
    construct fails every check of the exercise, before any of its code runs."""
    from grader.judge.source import audit

    cache = plugin.__dict__.setdefault("audits", {})
    if exercise not in cache:
        directory = getattr(plugin.workers, "sources", None) or plugin.workers.directory
        try:
            findings = audit.audit(directory, exercise)
        except OSError as e:
            findings = [audit.Finding(f"{exercise}.py", 1, f"a file the grader cannot read ({e})")]
        cache[exercise] = audit.message(findings, exercise, label(plugin.workers.directory)) \
            if findings else ""
    if cache[exercise]:
        raise errors.FileProblem(cache[exercise], status="failed")


def replays_in_thread(check, mode: str) -> bool:
    """Whether a check's replays begin beside its next calls (grader.plugin.ReplaysInThread): an
    untimed gpu check on CUDA, where a replay is a GPU call in another worker; never beside a
    timed call, nor in a check that needs the GPU to itself, nor under the interpreter, where
    it would take the check's own core."""
    return mode == "cuda" and check.layer == "gpu" and not check.gpu_alone


@pytest.fixture
def student(request):
    plugin = _plugin(request)
    check = plugin.check_of(request.node)

    def get(exercise: str | None = None, mode: str | None = None):
        exercise = exercise or check.exercise
        mode = mode or LAYER_MODE.get(check.layer, EXERCISES[exercise].mode)
        audited(plugin, exercise)
        workers = plugin.workers

        def replayer():   # the replay worker, the front end's worker (interp only), the sources
            sources = workers.sources
            filtered = provenance.replay_sources(sources)
            compiler = workers.replayer(exercise, "cpu", filtered) if mode == "interp" else None
            return workers.replayer(exercise, mode, filtered), compiler, sources

        return ProvingSubmission(workers.get(exercise, mode), exercise,
                                 target=getattr(plugin, "target", None), check_id=check.id,
                                 replayer=replayer if REPLAY else None,
                                 pending=plugin.replays_of(request.node.nodeid,
                                                           replays_in_thread(check, mode)))

    return get


class Rng:
    """A np.random.Generator (every method delegates to it) that remembers its seed."""

    def __init__(self, seed: int):
        self.seed = seed
        self.generator = np.random.default_rng(seed)

    def __getattr__(self, name):
        return getattr(self.generator, name)


@pytest.fixture
def rng():
    seed = options.current().seed
    if seed is None:
        seed = int(np.random.SeedSequence().entropy % (2**32))
    return Rng(seed)


@pytest.fixture
def workers(request):
    """Every worker of this run: perf checks stop them all before timing a PyTorch baseline."""
    return _plugin(request).workers


@pytest.fixture
def credit(request):
    c = Credit()
    _plugin(request).credits[request.node.nodeid] = c
    return c


@pytest.fixture
def after_timing(request):
    """`after_timing(work)`: work() (a timed request's verification, the gated calls after
    timing, a verdict that needs them) runs after the check's body, and its exception is the
    check's outcome. At the end of the check;
    or, when the grade times every perf check first (grader.run), after the last of them, with
    the GPU shared by the untimed checks: nothing there is timed any more. Work that needs the
    worker as timing left it (its last output, a trace) is fetched before, in the body."""
    return _plugin(request).pending_after_timing.setdefault(request.node.nodeid, []).append


@pytest.fixture
def environment(request):
    return _plugin(request).env


class GpuContext:
    """The GPU as the trusted process sees it: its description, its profile (grader.judge.machine.devices),
    and ceilings measured once per run in this process (copy GB/s, fp16 matmul TFLOP/s).

    `tile_profile` is what the perf layer's tile sweeps read: this device's profile, or with a
    grading target (--target gb10) this device's thresholds with the target's tile shapes and
    shared memory limit (no bigger than this device's), so the speed points are earned with
    the tiles the target can run; the thresholds stay ratios measured here."""

    def __init__(self, plugin):
        import torch

        from grader.judge.machine import ceilings, devices
        from grader.judge.perf import quiet_gpu
        from grader.judge.perf.measured_once import measured_once

        quiet_gpu.stop_students(plugin.workers)   # no student process alive while the ceilings are timed
        self.info = devices.describe(torch)
        p = torch.cuda.get_device_properties(0)
        self.profile = devices.profile_for((p.major, p.minor), p.name, self.info["smem_per_block"])
        evidence = getattr(plugin, "target", None)
        self.target = evidence.profile if evidence is not None else None
        self.tile_profile = self.profile
        if self.target is not None:
            self.tile_profile = target.tile_profile(self.profile, self.target)
        # measured once, up front, in this process (or earlier in this batch: judge.perf.measured_once),
        # where the perf layer runs: only its checks read them (a grading process of the
        # untimed gpu checks would time them for nothing, beside the others' kernels); the
        # report's header shows them
        self.ceilings = {}
        if "perf" in plugin.selection.layers:
            from grader.sandbox import calllog

            with calllog.span("ceilings"):
                self.ceilings = {
                    name: round(float(measured_once("ceiling", {"name": name}, lambda f=f: f(torch))), 1)
                    for name, f in (("copy_gbs", ceilings.copy_bandwidth_gbs),
                                    ("matmul_tflops", ceilings.matmul_tflops))}
        plugin.device_info.update(self.info, **self.ceilings)

    def ceiling(self, name: str) -> float:
        """"copy_gbs" or "matmul_tflops" (perf checks only: measured where the perf layer runs)."""
        if name not in self.ceilings:
            raise RuntimeError(f"grader defect: ceiling {name!r} read in a run without the perf "
                               f"layer, where none is measured")
        return self.ceilings[name]


@pytest.fixture(scope="session")
def gpu(request):
    return GpuContext(_plugin(request))
