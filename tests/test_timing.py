"""The timing layer's logic on the CPU: the bench clock, and the perf layer's verified requests.

The perf layer runs on a GPU; what it decides is tested here with CPU tensors: a real worker
(softmax_triton under the interpreter) answers `runs` requests, and the grader's verification
must pass honest outputs and catch skipped, stale or NaN ones, with the choice of what to check
made after the call.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import torch

from grader.exercises.bench_attn.reference import Clock, Stream, log_spread, work_seen
from grader.exercises.bench_attn.judging import WORK_MS, Above, again, fits_clock, judge_proper
from grader.judge.perf import baselines, quiet_gpu, timed_requests, timing
from grader.judge.answers import compare
from grader.judge.answers.inputs import seeded, torch_randn
from grader.sandbox import launched, proxy
from grader.sandbox.workers import Workers
from grader.wire.checksum import checksum, checksum_weights, refill
from grader.worker import probes, workloads
from tests.helpers import SOLUTIONS, Rng

# ------------------------------------------------------------------------------ the bench clock


def _proper(fn, sync, warmup, rep):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(rep):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def _with_clock(tmp_path, stream, body):
    with Clock(tmp_path, {"fn": stream}, Rng(1)) as clock:
        work = workloads.AsyncWork(str(clock.path), "fn")
        start = time.perf_counter()
        got = body(work)
        end = time.perf_counter()
        work._sock.close()
        workloads._LIVE.clear()
    return got, start, end


def test_clock_bounds_an_honest_timer(tmp_path):
    stream = Stream(ms=3.0, compile_ms=20.0)
    got, start, end = _with_clock(tmp_path, stream,
                                  lambda w: _proper(w, w.synchronize, warmup=2, rep=5))
    assert len(stream.launches()) == 7
    assert 3.0 <= got < 30
    judge_proper(stream, got, 2, 5, start, end, "time_proper", "case")   # passes
    with pytest.raises(compare.CheckFailed, match="before the work was done"):
        judge_proper(stream, 0.5, 2, 5, start, end, "time_proper", "case")
    with pytest.raises(compare.CheckFailed, match="work of the timed calls took"):
        judge_proper(stream, 26.0 + (end - start) * 1e3, 2, 5, start, end, "time_proper", "case")
    with pytest.raises(compare.CheckFailed, match="counted 7 calls"):
        judge_proper(stream, got, 2, 20, start, end, "time_proper", "case")


def test_a_sweep_row_bound_holds_the_median_not_the_sum(tmp_path):
    """fits_clock (sweep_rows, oom_recorded, backend_probe): a blocking impl timed as
    time_proper times it (5 warm-up calls, 20 timed), then a pause of 60 ms before the sweep's
    call ends, as a loaded machine or the sweep's next step makes one. The median and the mean
    of the 20 times fit; their sum does not, nor a time shorter than the work."""
    stream = Stream(blocking=True, ms=1.5)

    def sweep(work):
        for _ in range(5):
            work()
        times = []
        for k in range(20):
            t0 = time.perf_counter()
            work()
            times.append((time.perf_counter() - t0) * 1e3)
        time.sleep(0.06)
        return times

    times, start, end = _with_clock(tmp_path, stream, sweep)
    launches = stream.launches()
    assert len(launches) == 25
    assert fits_clock(float(np.median(times)), stream, launches, start, end) is None
    assert fits_clock(float(np.mean(times)), stream, launches, start, end) is None
    low, high, error = fits_clock(sum(times), stream, launches, start, end)
    assert 1.5 <= low <= high < sum(times) / 4 and error is Above     # run again, on fresh work
    below = fits_clock(1.0, stream, launches, start, end)                  # shorter than the work
    assert below[:2] == (low, high) and below[2] is compare.CheckFailed    # no load reads less


def test_a_number_padded_into_the_interval_does_not_fit(tmp_path):
    """The cheat of tests/exercises/bench_attn/cheats/bench_constant_numbers, in small: every
    call made, a pause after each (and, for a synchronised timer, between the call and its
    sync), and a number chosen beforehand. The interval a timer could have spanned holds it;
    the work the grader's clock saw (clock.work_seen) does not. Above its bound, the case runs
    again on fresh work (judging.again), which a number chosen beforehand misses again."""
    blocking = Stream(blocking=True, ms=1.5)

    def padded(work):
        for _ in range(25):
            work()
            time.sleep(0.004)
        return 4.0

    got, start, end = _with_clock(tmp_path, blocking, padded)
    low, high, error = fits_clock(got, blocking, blocking.launches(), start, end)
    assert high < 2.0 and error is Above

    launched = Stream(ms=2.0)

    def synced(work):
        for _ in range(3):
            work()
        work.synchronize()
        for _ in range(5):
            work()
            time.sleep(0.01)                  # after the work is done: idle, not the work's
            work.synchronize()
        return 10.0

    got, start, end = _with_clock(tmp_path, launched, synced)
    seen = [work_seen(launched.events, e, waited=True) for e in launched.launches()[3:]]
    assert all(0.002 <= t < 0.004 for t in seen), seen
    with pytest.raises(compare.CheckFailed, match="work of the timed calls took"):
        judge_proper(launched, got, 3, 5, start, end, "time_proper", "case")


def test_a_number_above_its_bound_runs_the_case_again():
    """Above: a number above what the work took (a measured one can be, on a loaded machine) runs
    the case again on fresh work, three runs in all; a number below it (no load makes a timer
    read less) fails at once."""
    runs = []

    def case(fails, error=Above):
        runs.append(1)
        if len(runs) <= fails:
            raise error("slowed")
        return "passed"

    assert again(case, 2) == "passed" and len(runs) == 3
    runs.clear()
    with pytest.raises(Above):
        again(case, 5)
    assert len(runs) == 3
    runs.clear()
    with pytest.raises(compare.CheckFailed):
        again(case, 5, compare.CheckFailed)
    assert len(runs) == 1


def test_clock_sees_a_missing_sync(tmp_path):
    stream = Stream(ms=5.0)
    got, start, end = _with_clock(tmp_path, stream,
                                  lambda w: _proper(w, lambda: None, warmup=1, rep=3))
    with pytest.raises(compare.CheckFailed):
        judge_proper(stream, got, 1, 3, start, end, "time_proper", "case")


def test_the_workload_holds_no_duration(tmp_path):
    stream = Stream(ms=12.5, compile_ms=40.0)

    def look(work):
        seen = [getattr(work, name, None) for name in type(work).__slots__]
        assert all(isinstance(x, type(work._sock)) for x in seen)
        assert not hasattr(work, "__dict__")
        return 0.0

    _with_clock(tmp_path, stream, look)


def test_torch_cuda_synchronize_reaches_the_workload(tmp_path):
    stream = Stream(ms=20.0)

    def body(work):
        with workloads.routed_synchronize():
            work()
            t0 = time.perf_counter()
            torch.cuda.synchronize()          # on a CPU build this would raise without routing
            return (time.perf_counter() - t0) * 1e3

    with Clock(tmp_path, {"fn": stream}, Rng(2)) as clock:
        work = workloads.AsyncWork(str(clock.path), "fn")
        waited = body(work)
    assert waited >= 15.0
    assert [e.kind for e in stream.events] == ["launch", "sync"]


def test_a_second_connection_to_a_stream_is_refused(tmp_path):
    with Clock(tmp_path, {"fn": Stream(ms=1.0)}, Rng(3)) as clock:
        workloads.AsyncWork(str(clock.path), "fn")
        intruder = workloads.AsyncWork(str(clock.path), "fn")
        with pytest.raises((RuntimeError, OSError)):
            intruder()
        workloads._LIVE.clear()


def test_honest_timings_workloads_leave_no_constant_inside_all_three():
    """honest_timing's three work times (clock.log_spread): one from each third of 0.2-50 ms,
    so the smallest and the largest are far more than the clock's slack apart, every draw."""
    for seed in range(200):
        works = log_spread(Rng(seed), *WORK_MS, 3)
        assert all(WORK_MS[0] <= w <= WORK_MS[1] for w in works)
        assert max(works) / min(works) > 10, works


def test_a_call_is_timed_on_its_own_cpu_seconds():
    """The watchdog's clock on the CPU modes (launched.cpu_seconds): this process's CPU time,
    growing while it computes, not while it sleeps."""
    before = launched.cpu_seconds(os.getpid())
    time.sleep(0.2)
    slept = launched.cpu_seconds(os.getpid())
    # spin until the clock has grown (on a loaded CI machine 0.3 s of wall may hold less than
    # 0.15 s of this process's CPU): a clock that does not grow with work fails at the deadline
    deadline = time.perf_counter() + 20
    while launched.cpu_seconds(os.getpid()) - slept < 0.15 and time.perf_counter() < deadline:
        sum(range(20000))
    spun = launched.cpu_seconds(os.getpid())
    assert slept - before < 0.1 and spun - slept >= 0.15
    assert launched.cpu_seconds(2 ** 22 + 12345) is None


# ------------------------------------------------------------------------------ perf requests


def test_refill_and_checksum_agree_across_tensors():
    a = torch.empty(5, 33)
    b = torch.empty(165)[:165].view(5, 33)
    refill(a, 11, 2.0)
    refill(b, 11, 2.0)
    assert torch.equal(a, b)
    w = checksum_weights(a, 5)
    assert float(checksum(a, w)) == pytest.approx(float(checksum(b.clone(), w)))
    assert torch.isnan(checksum(None, w))
    assert torch.isnan(checksum(a[:, :10], w))


class FakeSub:
    """A worker stand-in that runs the probe's `runs` loop in this process."""

    def __init__(self, fn, x):
        self.fn, self.x = fn, x

    def call(self, name, *args, opts=None, **kwargs):
        value = probes.run(self.fn, [self.x], kwargs, opts)
        if opts.get("fetch"):
            value = None if value is None else compare_value(value)
        return proxy.CallResult(value, extras={})


def compare_value(t):
    from grader.wire.codec import TensorValue

    return TensorValue(t.detach().double().numpy(), str(t.dtype).removeprefix("torch."), "cpu",
                       tuple(t.shape), tuple(t.stride()))


def _requests(fn, rng, dtype="float32"):
    x = torch.empty(7, 130, dtype=getattr(torch, dtype))
    ref = lambda inputs: torch.softmax(inputs[0].double(), dim=-1)
    return timed_requests.Requests(FakeSub(fn, x), "softmax", [x], rng=rng, reference=ref,
                                   inputs=[torch.empty_like(x)], dtype=dtype, what="softmax(x)",
                                   full_share=1.0)


def test_honest_requests_verify():
    reqs = _requests(lambda x: torch.softmax(x.float(), -1).to(x.dtype), Rng(4), "float16")
    for repeat in (2, 12, 2, 30):
        reqs(repeat)
    assert reqs.verify() >= 4


@pytest.mark.parametrize("name, fn", [
    ("nan", lambda x: torch.full_like(x, float("nan"))),
    ("uniform", lambda x: torch.full_like(x, 1 / x.shape[-1])),
])
def test_outputs_that_compute_nothing_fail(name, fn):
    reqs = _requests(fn, Rng(5))
    reqs(3)
    with pytest.raises(compare.CheckFailed, match="wrong output|NaN"):
        reqs.verify()


def test_skipping_work_on_some_calls_is_caught():
    """A cache that answers every call after the first with the first output (what a kernel that
    tells timed calls apart, or caches by pointer, would do) fails on its checksums."""
    cache = {}

    def lazy(x):
        if "out" not in cache:
            cache["out"] = torch.softmax(x, -1)
        return cache["out"].clone()

    caught = 0
    for seed in range(5):
        cache.clear()
        reqs = _requests(lazy, Rng(seed))
        reqs(12)
        try:
            reqs.verify()
        except compare.CheckFailed:
            caught += 1
    assert caught == 5


def test_roofline_floor():
    assert timing.below_floor(1.0, 1.0, "x") is None
    assert "roofline" in timing.below_floor(0.5, 1.0, "x")
    assert "roofline" in timing.below_floor(-0.01, 1.0, "x")


def test_quiet_gpu_fails_closed():
    class Workers:
        def __init__(self):
            self.closed = 0

        def all(self):
            return [self]

        def close(self):
            self.closed += 1

    w = Workers()
    assert quiet_gpu.quiet_gpu(w, "x", processes=lambda: []) == ""
    assert w.closed == 1
    assert "unavailable" in quiet_gpu.quiet_gpu(w, "x", processes=lambda: None)
    import os

    with pytest.raises(compare.CheckFailed, match="other processes"):
        quiet_gpu.quiet_gpu(w, "x", processes=lambda: [os.getppid()])
    # a PID from another namespace (not in this /proc) is not ours to judge
    assert quiet_gpu.quiet_gpu(w, "x", processes=lambda: [2 ** 22 + 7]) == ""


def test_runs_request_through_a_real_worker(tmp_path):
    """End to end on CPU: the worker's `runs` loop, the codec, and verification."""
    workers = Workers(SOLUTIONS, tmp_path)
    try:
        sub = workers.get("softmax_triton", "interp")
        shape, seed = (3, 130), 9
        marker = seeded(shape, "float32", "cpu", seed, 1.0, 0)
        x = torch_randn(shape, "float32", "cpu", seed)
        reqs = timed_requests.Requests(sub, "softmax", [marker], rng=Rng(6), inputs=[x],
                                       dtype="float32", what="softmax(x)", full_share=1.0,
                                       reference=lambda i: torch.softmax(i[0].double(), -1))
        reqs(1)
        reqs(3)
        assert reqs.verify() >= 2
    finally:
        workers.close()


def test_an_array_argument_crosses_with_the_first_request_only(tmp_path):
    """Through a real worker on CPU: an array marker (flash_bwd's given o) is sent whole once,
    later requests name the values the worker kept, and every request's outputs verify; a
    worker started afresh (the last one died between two requests) gets the array again; the
    replay's arguments (Requests.args) keep the array."""
    from grader.judge.answers.inputs import tensor

    workers = Workers(SOLUTIONS, tmp_path)
    sent = []
    try:
        sub = workers.get("softmax_triton", "interp")
        call = sub.call

        def recorded(fn, *args, **kwargs):
            sent.append(args)
            return call(fn, *args, **kwargs)

        sub.call = recorded
        x = torch_randn((3, 130), "float32", "cpu", 11)
        reqs = timed_requests.Requests(sub, "softmax",
                                       [tensor(x.numpy(), "float32", "cpu", guard=4)],
                                       rng=Rng(8), inputs=[x], dtype="float32", what="softmax(x)",
                                       full_share=1.0,
                                       reference=lambda i: torch.softmax(i[0].double(), -1))
        for repeat in (1, 3, 2):
            reqs(repeat)
        sub._kill()            # a worker that died between two requests: a fresh one keeps nothing
        reqs(2)
        reqs(1)
        assert reqs.verify() >= 5
    finally:
        workers.close()
    markers = [args[0] for args in sent if args]
    assert markers[0].array is not None and markers[0].kept
    assert [m.array is None for m in markers] == [False, True, True, True, False, True]
    assert {m.kept for m in markers} == {markers[0].kept}
    assert reqs.args[0].array is not None


def test_a_kernel_that_skips_timed_calls_is_caught(tmp_path):
    """tools/gpu_mutants.py's skipper (it computes only on calls that do not look timed),
    through a real worker on CPU: its requests fail verification."""
    from tools import gpu_mutants

    folder = gpu_mutants.perf_submissions(tmp_path / "subs")["skip_timed"]
    workers = Workers(folder, tmp_path / "scratch")
    try:
        sub = workers.get("softmax_triton", "interp")
        shape, seed = (3, 130), 10
        marker = seeded(shape, "float32", "cpu", seed, 1.0, 0)
        x = torch_randn(shape, "float32", "cpu", seed)
        assert sub.softmax(marker) is not None          # the first call computes
        reqs = timed_requests.Requests(sub, "softmax", [marker], rng=Rng(7), inputs=[x],
                                       dtype="float32", what="softmax(x)",
                                       reference=lambda i: torch.softmax(i[0].double(), -1))
        reqs(3)
        with pytest.raises(compare.CheckFailed, match="wrong output|NaN|max abs error"):
            reqs.verify()
    finally:
        workers.close()


def test_a_timer_that_calls_torch_cuda_synchronize_gets_full_marks(tmp_path):
    """Right on a GPU, so right here: torch.cuda.synchronize() reaches the workload, and on a
    CPU worker it is a no-op (CPU ops finish before they return)."""
    from tests.helpers import copy_solutions, grade

    source = (SOLUTIONS / "bench_attn.py").read_text()
    a = source.index("def time_proper(")
    b = source.index("\ndef ", a + 1)
    timer = '''def time_proper(fn, *args, warmup=5, rep=20, sync=None) -> float:
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(rep):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(*args)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)

'''
    sub = copy_solutions(tmp_path / "sub", {"bench_attn.py": source[:a] + timer + source[b:]})
    report = grade(sub, "--exercises", "bench_attn", "--layers", "cpu,adversarial")
    failing = [(t["name"], t["message"]) for t in report["tests"]
               if t["status"] not in ("passed", "not_run")]
    assert not failing and report["score"] == report["max_score"] > 0, failing


def test_harness_cost_on_a_cpu_is_its_wall_clock():
    import torch

    ms = baselines.harness_gpu_ms(torch.zeros(64, 32))
    assert 0 < ms < 50


class _Gpu:
    """The `gpu` fixture's one method timed_against reads (a copy bandwidth far above any CPU)."""

    def ceiling(self, name: str) -> float:
        return 1e9


@pytest.mark.parametrize("folder", ["solutions", "stubs"])
def test_timed_against_times_the_student_before_any_baseline(folder, tmp_path):
    """baselines.timed_against on CPU (softmax_triton under the interpreter): the student's
    requests come first, verified; the baseline runs only after them, with the workers
    stopped, so a submission that fails (a stub) costs no baseline."""
    from grader import errors
    from tests.helpers import copy_solutions

    source = copy_solutions(tmp_path / "sub")
    if folder == "stubs":
        stub = (source / "softmax_triton.py").read_text() + (
            "\n\ndef softmax(x):\n    raise NotImplementedError('TODO(softmax_triton)')\n")
        (source / "softmax_triton.py").write_text(stub)
    workers = Workers(source, tmp_path / "scratch")
    order = []

    def baseline(x):
        order.append(("baseline", sum(s._worker is not None for s in workers.all())))
        return torch.softmax(x, -1)

    try:
        sub = workers.get("softmax_triton", "interp")
        shape, seed = (3, 130), 11
        marker = seeded(shape, "float32", "cpu", seed, 1.0, 0)
        x = torch_randn(shape, "float32", "cpu", seed)
        case = (marker, x, 2 * x.numel() * 4, "softmax(x) on 3 x 130")
        if folder == "stubs":
            with pytest.raises(errors.NotImplementedByStudent):
                baselines.timed_against(sub, Rng(8), _Gpu(), workers, "softmax", [case], "float32",
                                     baseline, lambda i: torch.softmax(i[0].double(), -1))
            assert order == []
            return
        t, = baselines.timed_against(sub, Rng(8), _Gpu(), workers, "softmax", [case], "float32",
                                  baseline, lambda i: torch.softmax(i[0].double(), -1))
        # on a CPU a 3 x 130 softmax costs about what the harness does, so either side less
        # the harness may come out below zero by noise: the raw per-call times may not
        assert t.base + t.harness > 0 and t.mine + t.harness > 0 and t.harness >= 0
        assert order and all(alive == 0 for _, alive in order), order
    finally:
        workers.close()


def test_only_the_requests_that_are_timed_are_checked():
    """per_call_ms's warm-up and probe (its first three requests) give no time that counts, so
    their outputs are not checked; every later request's are, and one wrong there fails."""
    def sometimes(wrong_requests):
        seen = {"calls": 0}

        def fn(x):
            seen["calls"] += 1
            request = seen["request"]
            return torch.zeros_like(x) if request in wrong_requests else torch.softmax(x, -1)

        return seen, fn

    for wrong, fails in (({1, 2, 3}, False), ({5}, True)):
        seen, fn = sometimes(wrong)
        reqs = _requests(fn, Rng(6))
        reqs.checked_runs = 50        # every call of a checked request
        counted = {"n": 0}
        call = reqs.call

        def numbered(count, call=call):
            counted["n"] += 1
            seen["request"] = counted["n"]
            return call(count)

        reqs.call = numbered
        timing.per_call_ms(reqs, first=1, more=2, target_ms=0.01, max_more=2)
        # unchecked: the warm-up, the base and the probe, and the probe taken again in full when
        # its calls came out far faster than a jittery base said (a loaded machine); then three
        # samples of two requests, every one checked
        assert counted["n"] - len(reqs.done) in (3, 4) and len(reqs.done) == 6
        if fails:
            with pytest.raises(compare.CheckFailed, match="wrong output"):
                reqs.verify()
        else:
            assert reqs.verify() > 0


# ------------------------------------------------------------------------------ nothing to time


def test_perf_checks_wait_for_a_kernel_that_exists(tmp_path):
    """An exercise whose graded functions all still begin with the stub's raise gets its perf
    checks as "not implemented" without running them: no worker, no profiler, no baseline,
    decided from the file before any other check ran (the timed checks may go first). One
    function written, and they run; so does a file the grader cannot read."""
    import shutil

    from grader import errors
    from grader.plugin import GradePlugin
    from grader.registry import ROOT, all_checks
    from grader.results import Selection

    CHECKS = all_checks(include_hidden=False)

    class Env:   # every exercise's needs met
        def why_not(self, needs):
            return None

    class Workers:
        sources = tmp_path

    def plugin(ex: str, layers=("gpu", "perf")) -> GradePlugin:
        return GradePlugin(CHECKS, Selection([ex], list(layers)), env=Env(), workers=Workers())

    def item(ex: str):
        perf = next(c for c in CHECKS.values() if c.exercise == ex and c.layer == "perf")

        class Item:   # what the hook reads of a pytest item
            def get_closest_marker(self, name):
                return pytest.mark.check(perf.id).mark
        return Item()

    for ex in ("softmax_triton", "flash_backward"):
        shutil.copy(ROOT / "exercises" / f"{ex}.py", tmp_path / f"{ex}.py")
        with pytest.raises(errors.NotImplementedByStudent, match="nothing to time"):
            plugin(ex).pytest_runtest_setup(item(ex))
        plugin(ex, ["interp"]).pytest_runtest_setup(item(ex))   # not selected: a skip stays one
    # flash_fwd written, flash_bwd still the stub: the forward is timed
    shutil.copy(ROOT / "exercises" / "flash_backward.py", tmp_path / "flash_backward.py")
    solution = (ROOT / "solutions" / "flash_backward.py").read_text()
    stub = (tmp_path / "flash_backward.py").read_text()
    fwd = solution[solution.index("def flash_fwd("):solution.index("def flash_bwd(")]
    (tmp_path / "flash_backward.py").write_text(
        stub[:stub.index("def flash_fwd(")] + fwd + stub[stub.index("def flash_bwd("):])
    assert plugin("flash_backward").stubbed("flash_backward") == ""
    shutil.copy(ROOT / "solutions" / "softmax_triton.py", tmp_path / "softmax_triton.py")
    plugin("softmax_triton").pytest_runtest_setup(item("softmax_triton"))   # runs
    (tmp_path / "softmax_triton.py").write_text("def softmax(x:\n")      # unreadable: runs
    assert plugin("softmax_triton").stubbed("softmax_triton") == ""


def test_a_stub_is_read_from_the_first_statement(tmp_path):
    """grader.judge.source.still_stub: only a plain def whose first statement after its docstring raises
    NotImplementedError, and which is the name's last binding, is still the stub."""
    from grader.judge.source.still_stub import still_stubs

    cases = {
        'def f(x):\n    """doc"""\n    raise NotImplementedError("TODO")\n    return x\n': True,
        "def f(x):\n    raise NotImplementedError\n": True,
        "def f(x):\n    y = x\n    raise NotImplementedError\n": False,
        "def f(x):\n    if x:\n        raise NotImplementedError\n    return x\n": False,
        "def f(x):\n    raise ValueError\n": False,
        "import functools\n@functools.lru_cache\ndef f(x):\n    raise NotImplementedError\n": False,
        "def f(x):\n    raise NotImplementedError\nf = abs\n": False,
        "def f(x):\n    raise NotImplementedError\nif True:\n    def f(x):\n        return x\n": False,
        "def f(x):\n    return x\ndef f(x):\n    raise NotImplementedError\n": True,
        "def g(x):\n    raise NotImplementedError\n": False,
    }
    for i, (text, stub) in enumerate(cases.items()):
        (tmp_path / f"m{i}.py").write_text(text)
        assert still_stubs(tmp_path / f"m{i}.py", ["f"]) == (["f"] if stub else []), text
    assert still_stubs(tmp_path / "missing.py", ["f"]) == []


def test_inputs_that_could_not_be_built_leave_nothing_behind(tmp_path):
    """A call whose second input fails to build (here a CUDA tensor on a machine without one; on
    the H100, a decode cache that found the GPU full) is a grader error, and the next call's
    recorded program numbers its own inputs from 0: the tensor built before the failure is
    dropped (it shifted every later input by one, and the replays of those calls failed)."""
    from grader import errors

    workers = Workers(SOLUTIONS, tmp_path)
    try:
        sub = workers.get("softmax_triton", "interp")
        good = seeded((3, 40), "float32", "cpu", 5, 1.0, 0)
        with pytest.raises(errors.GraderError, match="could not build the inputs"):
            sub.call("softmax", good, seeded((3, 40), "float32", "cuda", 6, 1.0, 0))
        r = sub.call("softmax", good, opts={"trace": True, "program": True})
        assert [int(i) for _, i in r.extras["program"]["inputs"]] == [0]
    finally:
        workers.close()


# ------------------------------------------------------------------------------ readings


def test_a_reading_is_the_median_with_the_range_of_the_middle_three():
    r = timing.Reading.of([3.0, 1.0, 2.0])
    assert r == 2.0 and (r.low, r.high) == (1.0, 3.0) and r.samples == (1.0, 2.0, 3.0)
    r = timing.Reading.of([9.0, 1.0, 2.0, 2.5, 3.0, 0.5, 2.2])
    assert r == 2.2 and (r.low, r.high) == (2.0, 2.5)
    assert type(r * 2) is float and timing.span(r, 0.5) == (1.5, 2.0)
    assert timing.span(4.0) == (4.0, 4.0) and timing.span(r, 5.0)[0] > 0
    assert timing.ratio_span((1.0, 2.0), (4.0, 8.0)) == (0.125, 0.5)


def _fake_request(per_call: list[float]):
    """request(repeat) for per_call_ms that reports its own time: each sample's per-call
    milliseconds taken in turn from `per_call` (the warm-up and probe at 1 ms a call)."""
    state = {"requests": 0}
    values = iter(per_call)

    def request(repeat: int) -> float:
        state["requests"] += 1
        n = state["requests"]
        if n <= 3:
            return float(1 + repeat)
        # sample k is requests (2k+2, 2k+3): the smaller then the larger; the difference counts
        if n % 2 == 0:
            return 0.0
        return float(next(values) * repeat)   # (repeat - first) calls at that speed + first's

    return request, state


def test_per_call_ms_times_a_slow_kernel_with_few_calls():
    """The difference of two requests spans about target_ms: a kernel whose 10 probe calls
    already span several times that is sampled with fewer (one, and no warm calls before it,
    when one call spans the target alone); a fast one, or one near the target, as before."""
    def timed(ms_per_call, fixed=40.0):
        repeats = []

        def request(repeat: int) -> float:
            repeats.append(repeat)
            return fixed + ms_per_call * (1 + repeat)

        got = timing.per_call_ms(request, target_ms=150.0)
        return got, repeats[3:]          # after the warm-up, the base and the probe

    got, sampled = timed(700.0)          # flash_fwd with 3 programs at N = 16K
    assert got == pytest.approx(700.0) and sampled == [0, 1] * 3
    got, sampled = timed(40.0)           # 10 calls span 400 ms: 4 more calls span 160
    assert got == pytest.approx(40.0) and sampled == [2, 6] * 3
    got, sampled = timed(20.0)           # 10 calls span 200 ms: near the target, as before
    assert got == pytest.approx(20.0) and sampled == [2, 12] * 3
    got, sampled = timed(0.5)            # a fast kernel: more calls until they span 150 ms
    assert got == pytest.approx(0.5) and sampled[:2] == [2, 2 + 301]


def test_per_call_ms_probes_a_slow_kernel_with_few_calls():
    """A base (the warm calls' second run) that spans twice the target probes with as few calls
    as it says span the target: one at 700 ms a call, not ten. A base that only a fixed cost's
    jitter made slow (a fast kernel) gets the full probe after all, and the same samples."""
    def timed(ms_per_call, fixed=40.0, jitter=0.0):
        repeats = []

        def request(repeat: int) -> float:
            repeats.append(repeat)
            return fixed + ms_per_call * (1 + repeat) + (jitter if len(repeats) == 2 else 0.0)

        got = timing.per_call_ms(request, target_ms=150.0)
        return got, repeats

    got, repeats = timed(700.0)
    assert got == pytest.approx(700.0) and repeats == [2, 2, 3] + [0, 1] * 3
    got, repeats = timed(220.0)          # flash_fwd with 3 programs at N = 8K: two calls
    assert got == pytest.approx(220.0) and repeats == [2, 2, 4] + [0, 1] * 3
    got, repeats = timed(0.5, jitter=1000.0)
    assert got == pytest.approx(0.5)
    assert repeats[:4] == [2, 2, 3, 12] and repeats[4:6] == [2, 2 + 1501]   # as with no probe cut
    assert timed(40.0)[1][:3] == [2, 2, 12]   # a base under twice the target: the full probe


def test_per_call_ms_samples_more_only_while_the_check_is_not_settled():
    """Three samples by default; with `settled`, two more at a time while it says no, up to
    SAMPLES_MAX, the median kept."""
    speeds = [2.0, 4.0, 3.0, 3.1, 3.05, 2.9, 1.0, 1.0, 1.0]

    def timed(settled):
        request, state = _fake_request(speeds)
        ms = timing.per_call_ms(request, first=0, more=100, target_ms=1.0, settled=settled)
        return ms, (state["requests"] - 3) // 2

    ms, samples = timed(None)
    assert samples == 3 and ms == pytest.approx(3.0) and (ms.low, ms.high) == (2.0, 4.0)
    ms, samples = timed(lambda r: True)
    assert samples == 3
    ms, samples = timed(lambda r: r.high - r.low < 0.5)          # 5: the middle 3.0 .. 3.1
    assert samples == 5 and ms == pytest.approx(3.05)
    ms, samples = timed(lambda r: False)
    assert samples == timing.SAMPLES_MAX and ms == 3.0 and (ms.low, ms.high) == (2.9, 3.05)
