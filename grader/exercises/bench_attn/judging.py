"""bench_attn's judgement of a timer against the grader's clock (reference.py), shared by its
adversarial checks and its hidden checks (hidden_tests/bench_attn/); is_number and positive_ms
by every layer's checks; and its sweeps as the grader calls and reads them: the rows of the
student's run_sweep (keys, order, the JSON file it wrote) and each timed row (ms, tflops from
the formula, peak_gb), shared by its cpu, adversarial and gpu checks."""

from __future__ import annotations

import json
import math
import numbers
import statistics
import time

from grader.exercises.bench_attn.reference import Clock, Stream, interval_bounds, work_seen
from grader.judge.answers.compare import CheckFailed
from grader.wire.codec import Trusted

# What a median of timed calls may report above the work the grader's clock saw (reference.work_seen:
# from a launch's arrival to its reply, or to the synchronize that waited for it, idle time left
# out): 10% + 0.5 ms. An honest timer also measures its own overhead and two wake-ups (the
# grader's clock thread seeing the request, the worker seeing the reply), which the grader's
# timestamps leave out: the solution's medians came within 0.2 ms of the work on a quiet 2-core
# machine. With four busy processes beside the grade a median now and then came far more
# (6 ms): a number above its bound runs the case again on fresh work (Above). Each
# check's draws are spread further apart than this tolerance (reference.log_spread), so no number
# that was not measured fits them all; summing the rep calls, timing the warm-up or a sync are
# off by far more.
OVER_REL, OVER_MS = 1.10, 0.5


class Above(CheckFailed):
    """A number above what the work took on the grader's clock. A measured one can be: its timer
    also sees wake-ups that the grader's timestamps leave out, and a loaded machine (or a virtual
    machine's stolen time, which no count in the guest shows) stretches them. So `again` runs
    the case again, on fresh work; a number that was not measured misses every fresh draw."""


def again(case, *args, tries: int = 3):
    """case(*args), run again while it fails as Above, `tries` times in all (each run draws its
    own work). A number below its bound is never run again: no load makes a timer read less."""
    for k in range(tries):
        try:
            return case(*args)
        except Above:
            if k + 1 == tries:
                raise


def is_number(x) -> bool:
    """A finite real number, not a bool: what a time in ms may be."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(float(x))


def positive_ms(value, what: str) -> float:
    """`value` as a float of milliseconds, or a failure unless it is positive and finite."""
    if not is_number(value) or float(value) <= 0:
        raise CheckFailed(f"{what}: expected a positive, finite number of milliseconds, "
                          f"got {value!r:.80}")
    return float(value)


# Each timer gets a fresh workload whose "device" is simulated in this process (reference.Clock):
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


def fits_clock(ms: float, stream: Stream, launches: list, start: float, end: float,
               over_ms: float = OVER_MS):
    """None when `ms` lies within what a median or a mean of the timed calls among `launches`
    (calls of a blocking stream, in order) measures on the grader's clock; else (low, high) in
    ms and the failure to raise (Above: the case runs again).

    Which calls were timed the grader does not know, only that they come last (time_proper's
    warm-up calls come first; one at least) and are at least half of them. Each measured its
    own work as the grader's clock saw it (reference.work_seen) and a little more (OVER_REL,
    OVER_MS), so their median is at most the upper median, and their mean at most the mean,
    of the last m of those, for some such m (`over_ms`: what else each call does before its
    launch, such as the backend probe's real sdpa). The interval between the calls is no bound: a
    pause before or after a call widens it, so a number that was never measured, padded with
    sleeps, would fit it (tests/exercises/bench_attn/cheats/bench_constant_numbers)."""
    low = min(interval_bounds(stream.events, e, start, end, waited=False)[0]
              for e in launches) * 1e3
    seen = [work_seen(stream.events, e, waited=False) for e in launches]
    seen = [t if t is not None else end - e.arrival for t, e in zip(seen, launches)]
    timed = [seen[-m:] for m in range(math.ceil(len(seen) / 2), len(seen))] or [seen]
    high = max(max(sorted(h)[len(h) // 2], statistics.fmean(h)) for h in timed) * 1e3
    if low * 0.999 <= ms <= high * OVER_REL + over_ms:
        return None
    return low, high, (Above if ms > low else CheckFailed)


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
    seen = [work_seen(stream.events, launch, waited) for launch in launches[warmup:]]
    seen = [end - launch.arrival if t is None else t for t, launch in zip(seen, launches[warmup:])]
    high = max(statistics.median(seen), statistics.fmean(seen))
    if got > high * 1e3 * OVER_REL + OVER_MS:
        raise Above(
            f"{what}: reported {got:.4g} ms, but on the grader's clock the work of the timed "
            f"calls took {as_ms(statistics.median(seen))} (median; {as_ms(min(seen))} to "
            f"{as_ms(max(seen))}) ({case}): the time must be measured around the calls, and "
            f"follow what they take",
            hint="time each of the rep calls on its own, warm-up outside the clock, and return "
                 "the median of their times (not their sum, nor a number chosen beforehand)")


# ------------------------------------------------------------------------------ sweeps

ROW_KEYS = ("N", "impl", "ms", "tflops", "peak_gb")
MAX_JSON_BYTES = 1 << 20
FLOAT32 = Trusted("dtype", params={"dtype": "float32"})    # torch.float32, built in the worker
# per (impl, N): what one call of a clocked impl takes, drawn per N (reference.log_spread over a
# sweep's Ns, so that the rows of one impl are a factor of 2 or more apart)
SWEEP_MS = (0.2, 8.0)


def call_sweep(sub, what: str, Ns, B, H, D, impls: dict, out_name: str,
               check_file: bool = True) -> tuple[list[dict], float]:
    """Run the student's run_sweep on CPU; return its rows (checked for keys and order) and the
    grader's wall time of the call in ms. `check_file`: the JSON at out_name holds the rows."""
    out = sub.scratch / out_name
    out.unlink(missing_ok=True)
    result = sub.call("run_sweep", Ns=list(Ns), B=B, H=H, D=D, dtype=FLOAT32, device="cpu",
                      impls=impls, out_path=out_name)
    rows = result.value
    expected = [(N, name) for N in Ns for name in impls]
    if not isinstance(rows, list):
        raise CheckFailed(f"{what}: expected a list of row dicts, got {type(rows).__name__} "
                          f"{rows!r:.80}")
    for i, (N, name) in enumerate(expected):
        if i >= len(rows):
            raise CheckFailed(f"{what}: expected {len(expected)} rows, one per (N, impl) in order, "
                              f"got {len(rows)}; the row for N={N}, impl={name!r} is missing")
        row = rows[i]
        if not isinstance(row, dict) or set(row) != set(ROW_KEYS):
            keys = sorted(row) if isinstance(row, dict) else type(row).__name__
            raise CheckFailed(f"{what}: row {i} (N={N}, impl={name!r}): expected the keys "
                              f"{list(ROW_KEYS)}, got {keys}")
        if row["N"] != N or row["impl"] != name:
            raise CheckFailed(f"{what}: row {i}: expected N={N}, impl={name!r} (one row per "
                              f"(N, impl), N outer, impls in the given order), got "
                              f"N={row['N']!r}, impl={row['impl']!r}")
    if len(rows) != len(expected):
        raise CheckFailed(f"{what}: expected {len(expected)} rows, one per (N, impl), got "
                          f"{len(rows)}")
    if check_file:
        _check_file(out, out_name, rows, what)
    return rows, result.wall_s * 1e3


def _check_file(path, name: str, rows: list[dict], what: str) -> None:
    """The JSON file the student's run_sweep wrote in its working directory holds the rows."""
    if path.is_symlink():   # the trusted side reads only what the worker wrote, never a link
        raise CheckFailed(f"{what}: expected {name} to be a plain file, got a symbolic link")
    if not path.is_file():
        raise CheckFailed(f"{what}: expected the rows written to {name} (out_path) as JSON, "
                          f"found no such file")
    if path.stat().st_size > MAX_JSON_BYTES:
        raise CheckFailed(f"{what}: {name} is {path.stat().st_size} bytes, far more than the rows")
    try:
        saved = json.loads(path.read_text(errors="replace"))
    except json.JSONDecodeError as e:
        raise CheckFailed(f"{what}: {name} is not valid JSON ({e})") from None
    if not isinstance(saved, list) or len(saved) != len(rows):
        count = len(saved) if isinstance(saved, list) else type(saved).__name__
        raise CheckFailed(f"{what}: expected {name} to hold the {len(rows)} returned rows, "
                          f"got {count}")
    for i, (s, r) in enumerate(zip(saved, rows)):
        if not isinstance(s, dict) or set(s) != set(r):
            raise CheckFailed(f"{what}: {name} row {i}: expected the keys {list(ROW_KEYS)}, got "
                              f"{sorted(s) if isinstance(s, dict) else type(s).__name__}")
        for key in ROW_KEYS:
            a, b = s[key], r[key]
            same = a == b or (is_number(a) and is_number(b)
                              and math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0))
            if not same:
                raise CheckFailed(f"{what}: {name} row {i} (N={r['N']}, impl={r['impl']!r}): "
                                  f"expected {key} = {b!r} as returned, got {a!r} in the file")


def check_timed_row(row: dict, B: int, H: int, D: int, what: str, formula: bool = True) -> None:
    """A row of a run that fit: ms measured, tflops a number (from the formula when `formula`:
    sweep_rows grades it, oom_recorded only needs numbers), peak_gb None on CPU."""
    N, name = row["N"], row["impl"]
    where = f"{what}: row N={N}, impl={name!r}"
    ms = positive_ms(row["ms"], f"{where}, ms")
    flops = 4 * B * H * N * N * D
    tflops = flops / ms / 1e9
    got = row["tflops"]
    if not is_number(got) or got <= 0:
        raise CheckFailed(f"{where}: expected tflops, a positive number, got {got!r}")
    if formula and not math.isclose(got, tflops, rel_tol=1e-6):
        raise CheckFailed(f"{where}: expected tflops = 4*B*H*N^2*D / ms / 1e9 = {flops} / {ms!r} "
                          f"/ 1e9 = {tflops!r}, got {got!r}")
    peak = row["peak_gb"]
    if peak is not None and not (is_number(peak) and peak >= 0):
        raise CheckFailed(f"{where}: expected peak_gb None (no CUDA here) or a number >= 0, "
                          f"got {peak!r}")


def check_rows_on_clock(rows: list[dict], streams: dict, start: float, end: float,
                        what: str) -> None:
    """Each row of a clocked impl (streams: {impl: reference.Stream}, blocking, a drawn time per N)
    holds an ms that timing that impl at that N measures on the grader's clock
    (start, end: the clock around the sweep's call). Rows of other impls, and rows whose ms is
    None (an out-of-memory run), are left to the caller."""
    for row in rows:
        if row["impl"] not in streams or row["ms"] is None:
            continue
        stream = streams[row["impl"]]
        launches = stream.launches(row["N"])
        where = f"{what}: row N={row['N']}, impl={row['impl']!r}"
        if not launches:
            raise CheckFailed(f"{where}: ms = {row['ms']!r}, but the grader's clock saw no call of "
                              f"{row['impl']} at N={row['N']}: every ms must come from timing "
                              f"that impl at that N",
                              hint="time each impl with time_proper(lambda: fn(q, k, v)) at each N")
        outside = fits_clock(row["ms"], stream, launches, start, end)
        if outside:
            low, high, error = outside
            raise error(f"{where}: ms = {row['ms']:.4g}, but one call of {row['impl']} at "
                        f"N={row['N']} took {stream.by_n[row['N']]:.3f} ms of work, and "
                        f"timing it measures between {low:.3f} and {high:.3f} ms on the "
                        f"grader's clock (a little more for the timer itself)",
                        hint="ms comes from time_proper on that impl at that N; is "
                             "time_proper right (see honest_timing)?")
