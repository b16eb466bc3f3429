"""adversarial checks for exercises/bench_attn.py (lesson: Break It 4 "Lie with a benchmark"):
the honest timer, the two dishonest ones, and an out-of-memory run in a sweep.

No GPU is needed: the worker runs on CPU tensors. The timers are given a workload
(`grader.worker.workloads.AsyncWork`) that behaves like a kernel launch: the call returns at once
(the first after a compile), the work finishes later, and `synchronize()` waits for it. The
workload holds only a socket: its durations are drawn in this process (log-uniform over 0.2 to
50 ms, new for every call) by `reference.Clock`, which answers each launch and synchronize on its
own clock and logs them. The grader counts the calls itself and sees what each one's work took
(judging.py); the reported number must lie between that and a little more, so neither a single
timed call nor a number that was not measured passes, however the calls around it are padded
with pauses: each check's workloads are a factor of 2 or more apart (reference.log_spread), and
the number must follow them.
"""

from __future__ import annotations

import time

import pytest

from grader.exercises.bench_attn.judging import (SWEEP_MS, WORK_MS, Above, again, as_ms,
                                                 call_sweep, check_rows_on_clock, check_timed_row,
                                                 is_number, judge_proper, positive_ms, timed_call)
from grader.exercises.bench_attn.reference import (Clock, Stream, interval_bounds, log_spread,
                                                   log_uniform, work_seen)
from grader.judge.answers.compare import CheckFailed
from grader.wire.codec import Trusted

COMPILE_MS = (30.0, 120.0)  # what the first call of a fresh workload pays before it returns


@pytest.mark.check("bench_attn.honest_timing")
def test_honest_timing(student, rng):
    sub = student()
    for work_ms in log_spread(rng, *WORK_MS, 3):
        again(_honest_case, sub, rng, work_ms)


def _honest_case(sub, rng, work_ms: float) -> None:
    compile_ms = log_uniform(rng, *COMPILE_MS)
    warmup, rep = int(rng.integers(2, 4)), int(rng.integers(5, 8))
    what = f"time_proper(fn, warmup={warmup}, rep={rep}, sync=fn.synchronize)"
    case = (f"fn: a launch that returns at once and whose work takes {work_ms:.3f} ms; its "
            f"first call also compiles for {compile_ms:.0f} ms [seed {rng.seed}]")
    stream = Stream(ms=work_ms, compile_ms=compile_ms)
    result, stream, start, end = timed_call(sub, rng, "time_proper", stream,
                                            warmup=warmup, rep=rep, sync="sync")
    got = positive_ms(result.value, what)
    judge_proper(stream, got, warmup, rep, start, end, what, case)


LAUNCH_MS = (1.0, 30.0)     # what a warm launch of 4b's workload takes before it returns
WARM_WORK_MS = (10.0, 50.0)  # and its work after: longer, so a synchronised 4b cannot pass
# one timed call, no median: what it may report above what the call took on the grader's clock.
# A wake-up of either process at a busy moment is all in it: 12 ms over an 80 ms compile was
# seen on a loaded 2-core machine. The two draws of each timer stay apart all the same: 4a's
# compiles a factor of 2, 4b's launches of 5.5 (log_spread)
ONE_CALL_REL, ONE_CALL_MS = 1.25, 2.0


@pytest.mark.check("bench_attn.dishonest_timers")
def test_dishonest_timers(student, rng):
    sub = student()
    # each timer twice, on workloads whose cost is a factor of 2 or more apart (log_spread): the
    # number must follow the cost it measures. 4a: one cold call, no sync: the compile, not the
    # work; 4b: warm, no sync: the launch only
    for compile_ms in log_spread(rng, *COMPILE_MS, 2):
        again(_cold_case, sub, rng, compile_ms)
    for launch_ms in log_spread(rng, *LAUNCH_MS, 2):
        again(_warm_case, sub, rng, launch_ms)


def _cold_case(sub, rng, compile_ms: float) -> None:
    work_ms = log_uniform(rng, *WORK_MS)
    case = (f"fn: its work takes {work_ms:.3f} ms after a launch that returns at once; its "
            f"first call compiles for {compile_ms:.0f} ms [seed {rng.seed}]")
    what = "time_once_no_sync(fn)"
    result, stream, start, end = timed_call(sub, rng, "time_once_no_sync",
                                            Stream(ms=work_ms, compile_ms=compile_ms))
    got = positive_ms(result.value, what)
    _judge_no_sync(stream, got, 0, start, end, what, case, compile_ms)


def _warm_case(sub, rng, launch_ms: float) -> None:
    work_ms = log_uniform(rng, *WARM_WORK_MS)
    compile_ms = log_uniform(rng, *COMPILE_MS)
    warmup = int(rng.integers(2, 5))
    case = (f"fn: a launch that takes {launch_ms:.3f} ms to return, then its work takes "
            f"{work_ms:.3f} ms [seed {rng.seed}]")
    what = f"time_warm_no_sync(fn, warmup={warmup})"
    result, stream, start, end = timed_call(
        sub, rng, "time_warm_no_sync",
        Stream(ms=work_ms, compile_ms=compile_ms, launch_ms=launch_ms), warmup=warmup)
    got = result.value
    if not is_number(got) or got < 0:
        raise CheckFailed(f"{what}: expected a number of milliseconds >= 0, got {got!r:.80}")
    _judge_no_sync(stream, float(got), warmup, start, end, what, case, compile_ms)


def _judge_no_sync(stream, got: float, warmup: int, start: float, end: float, what: str,
                   case: str, compile_ms: float) -> None:
    """One launch timed after `warmup` untimed ones, the clock stopped as soon as it returned:
    the number lies between what the launch took to return on the grader's clock and a little
    more (ONE_CALL_REL, ONE_CALL_MS)."""
    launches = stream.launches()
    if len(launches) != warmup + 1:
        expected = "one cold call" if warmup == 0 else f"{warmup} warm-up calls, then one timed call"
        raise CheckFailed(f"{what}: the grader's clock counted {len(launches)} calls of fn; "
                          f"expected {warmup + 1}: {expected} ({case})",
                          hint="Break It 4: 4a times one cold call (no warm-up); 4b makes "
                               "`warmup` untimed calls, then times one")
    launch = launches[-1]
    low, _ = interval_bounds(stream.events, launch, start, end, waited=False)
    seen = work_seen(stream.events, launch, waited=False)
    high = end - launch.arrival if seen is None else seen
    if got > high * 1e3 * ONE_CALL_REL + ONE_CALL_MS:
        synced = any(e.kind == "sync" and e.arrival >= launch.arrival for e in stream.events)
        if synced:
            why = ("the clock kept running through a synchronize: this timer must not sync, so "
                   "that it shows what an unsynchronised timing measures")
        elif warmup and got >= 0.9 * compile_ms:
            why = (f"that includes the {compile_ms:.0f} ms compile: make the warm-up calls before "
                   f"starting the clock")
        else:
            why = ("only the one call belongs inside the clock, and the number is what the clock "
                   "measured around it")
        raise Above(
            f"{what}: reported {got:.4g} ms, but the timed call took {as_ms(high)} to return on "
            f"the grader's clock ({case})", hint=f"Break It 4: {why}")
    if got < low * 1e3 * 0.999:
        raise CheckFailed(f"{what}: reported {got:.4g} ms, but the call took at least {as_ms(low)} "
                          f"before it returned on the grader's clock ({case}); milliseconds, "
                          f"from just before the call to just after it",
                          hint="Break It 4a: the first call pays the compile: perf_counter right "
                               "before and right after the one call, times 1e3")


@pytest.mark.check("bench_attn.oom_recorded")
def test_oom_recorded(student, rng):
    again(_oom_sweep, student(), rng)


def _oom_sweep(sub, rng):
    Ns, B, H, D, limit = [16, 48, 80], 1, 2, 16, 48
    # "big" raises torch.OutOfMemoryError from N = 48 on; the impl after it must still run.
    # "sdpa" and "after" run a time drawn per N on the grader's clock, so the rows that fit are
    # judged on what timing them measures, as sweep_rows judges its rows
    clocked = ("sdpa", "after")
    streams = {name: Stream(blocking=True, by_n=dict(zip(Ns, log_spread(rng, *SWEEP_MS, len(Ns)))))
               for name in clocked}
    what = (f"run_sweep(Ns={Ns}, B={B}, H={H}, D={D}, float32, device='cpu', "
            f"impls=['sdpa', 'big', 'after']), where 'big' raises torch.OutOfMemoryError for "
            f"N >= {limit} [seed {rng.seed}]")
    with Clock(sub.scratch, streams, rng) as clock:
        impls = {"sdpa": Trusted("async_work", params=clock.params("sdpa")),
                 "big": Trusted("oom_above", params={"n": limit}),
                 "after": Trusted("async_work", params=clock.params("after"))}
        start = time.perf_counter()
        # the file is sweep_rows' business: one mistake should cost one check
        rows, _ = call_sweep(sub, what, Ns, B, H, D, impls, "attn_bench_oom.json", check_file=False)
        end = time.perf_counter()
    for row in rows:
        if row["impl"] == "big" and row["N"] >= limit:
            for key in ("ms", "tflops", "peak_gb"):
                if row[key] is not None:
                    raise CheckFailed(f"{what}: row N={row['N']}, impl='big' ran out of memory: "
                                      f"expected {key} = None, got {row[key]!r}")
        else:
            check_timed_row(row, B, H, D, what, formula=False)
    check_rows_on_clock(rows, streams, start, end, what)
