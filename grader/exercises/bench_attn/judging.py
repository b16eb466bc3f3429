"""bench_attn's judgement of a timer against the grader's clock (clock.py), shared by its
adversarial checks and its hidden checks (hidden_tests/bench_attn/); is_number and positive_ms
by every layer's checks."""

from __future__ import annotations

import math
import numbers
import statistics
import time

from grader.exercises.bench_attn.clock import Clock, Stream, interval_bounds
from grader.judge.compare import CheckFailed
from grader.wire.codec import Trusted

# What a timer may report above the longest interval the grader's clock allows (the bound is
# exact up to scheduling): 2% + 50 us. An honest timer was seen 13 us over on a loaded 2-core
# machine (CI); summing the rep calls, timing the warm-up or a sync are off by far more.
OVER_REL, OVER_MS = 1.02, 0.05


def is_number(x) -> bool:
    """A finite real number, not a bool: what a time in ms may be."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(float(x))


def positive_ms(value, what: str) -> float:
    """`value` as a float of milliseconds, or a failure unless it is positive and finite."""
    if not is_number(value) or float(value) <= 0:
        raise CheckFailed(f"{what}: expected a positive, finite number of milliseconds, "
                          f"got {value!r:.80}")
    return float(value)


# Each timer gets a fresh workload whose "device" is simulated in this process (clock.Clock):
# durations drawn here, log-uniformly over 0.2 to 50 ms, never sent to the worker; every launch
# and synchronize logged on this clock. The grader counts the calls itself and bounds what a
# timer around them could have measured; the reported number must fall inside those bounds.

WORK_MS = (0.2, 50.0)       # how long one launch's work takes, drawn per call


def timed_call(sub, rng, fn_name: str, stream: Stream, **kwargs):
    """Call fn_name(fn, **kwargs) with a fresh workload; kwargs may name "sync". Returns
    (result, stream, start, end) with start/end the grader's clock around the call."""
    with Clock(sub.scratch, {"fn": stream}, rng) as clock:
        fn = Trusted("async_work", key="w", params=clock.params("fn"))
        if kwargs.get("sync") == "sync":
            kwargs["sync"] = Trusted("async_work", key="w", attr="synchronize",
                                     params=clock.params("fn"))
        start = time.perf_counter()
        result = sub.call(fn_name, fn, **kwargs)
        end = time.perf_counter()
    return result, stream, start, end


def fits_clock(ms: float, stream: Stream, launches: list, start: float, end: float):
    """(low, high) in ms: what a median or a mean of the timed calls among `launches` (calls of
    a blocking stream, in order) could have measured on the grader's clock, and None when `ms`
    lies inside, else the pair.

    Which calls were timed the grader does not know, only that they come last (time_proper's
    warm-up calls come first; one at least) and are at least half of them. Each measured at
    most its own interval's high bound, so their median is at most the upper median, and their
    mean at most the mean, of the last m highs, for some such m. The longest interval is no
    bound: the first call's opens when the whole call began, the last call's runs on to
    whatever comes next, and on a loaded machine that pause can be as long as twenty calls (a
    sum of the timed calls then fitted in one grade and not in the next)."""
    bounds = [interval_bounds(stream.events, e, start, end, waited=False) for e in launches]
    low = min(b[0] for b in bounds) * 1e3
    highs = [b[1] for b in bounds]
    timed = [highs[-m:] for m in range(math.ceil(len(highs) / 2), len(highs))] or [highs]
    high = max(max(sorted(h)[len(h) // 2], statistics.fmean(h)) for h in timed) * 1e3
    return None if low * 0.999 <= ms <= high * OVER_REL + OVER_MS else (low, high)


def as_ms(x: float) -> str:
    """Seconds on the grader's clock, written in milliseconds."""
    return f"{x * 1e3:.3f} ms"


def judge_proper(stream, got: float, warmup: int, rep: int, start: float, end: float,
                 what: str, case: str) -> None:
    """The grader's count of calls, then what its log says any honest timer could report.
    A blocking stream runs each call's work before returning (a CPU op): no sync is needed."""
    waited = not stream.blocking
    launches = stream.launches()
    if len(launches) != warmup + rep:
        n = len(launches)
        why = ("fn was never called: the time must come from real calls" if n == 0 else
               "one timed call: rep is the number of timed calls, and the median of their times "
               "is the answer" if n <= warmup + 1 else
               "were the warm-up calls made, and exactly rep timed calls after them?")
        raise CheckFailed(f"{what}: the grader's clock counted {n} calls of fn; expected warmup + "
                          f"rep = {warmup} + {rep} = {warmup + rep} ({case}). {why}",
                          hint="warm-up first: `warmup` untimed calls, then time `rep` calls, "
                               "each on its own, and return their median")
    lows, highs = [], []
    for k, launch in enumerate(launches[warmup:]):
        earlier = [e.done for e in launches if e.arrival < launch.arrival]
        if earlier and max(earlier) > launch.arrival + 1e-6:
            raise CheckFailed(
                f"{what}: timed call {k + 1} of {rep} was launched while earlier calls were still "
                f"running on the device (their work ended {as_ms(max(earlier) - launch.arrival)} "
                f"later) ({case}); that time is billed to this call",
                hint="sync() before starting the clock, so earlier queued work (the warm-up "
                     "calls) is not billed to the timed call")
        low, high = interval_bounds(stream.events, launch, start, end, waited=waited)
        lows.append(low)
        highs.append(high)
    if got < min(lows) * 1e3 * 0.999:
        raise CheckFailed(
            f"{what}: reported {got:.4g} ms, but the work of every timed call took at least "
            f"{as_ms(min(lows))} on the grader's clock ({case}): the clock stopped before the work "
            f"was done",
            hint="kernels launch asynchronously: call sync() after fn() and before reading the "
                 "clock (synchronise), and return milliseconds")
    missing = [k + 1 for k, high in enumerate(highs) if high is None]
    if missing:
        raise CheckFailed(
            f"{what}: timed call {missing[0]} of {rep} was never waited for: no synchronize "
            f"covered its work before the next call ({case})",
            hint="call sync() after fn() inside the timed region (synchronise), so the clock "
                 "stops when the work is done, not when it is queued")
    high = max(statistics.median(highs), statistics.fmean(highs))
    if got > high * 1e3 * OVER_REL + OVER_MS:
        raise CheckFailed(
            f"{what}: reported {got:.4g} ms, more than the timed calls could have measured on the "
            f"grader's clock (at most {as_ms(high)} each; the work took {as_ms(min(lows))}) ({case})",
            hint="time each of the rep calls on its own, warm-up outside the clock, and return "
                 "the median of their times (not their sum)")
