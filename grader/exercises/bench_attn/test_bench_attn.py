"""Checks for exercises/bench_attn.py (lesson: "Benchmarking a kernel without lying to yourself",
Build It's bench_attn.py, Break It 4 "Lie with a benchmark").

No GPU is needed: the worker runs on CPU tensors. The timers are given a workload
(`grader.worker.workloads.AsyncWork`) that behaves like a kernel launch: the call returns at once
(the first after a compile), the work finishes later, and `synchronize()` waits for it. The
workload holds only a socket: its durations are drawn in this process (log-uniform over 0.2 to
50 ms, new for every call) by `grader.judge.timing.Clock`, which answers each launch and
synchronize on its own clock and logs them. The grader counts the calls itself and bounds what
any timer around them could have measured; the reported number must lie within those bounds, so
neither a constant nor a single timed call passes. Sweeps get workloads that run a drawn time per
N (their rows' ms are checked the same way), trusted attention (`Attention`, `OutOfMemoryAbove`)
and tiny shapes; rows are checked against the formula and the JSON file the student's code wrote.
"""

from __future__ import annotations

import json
import math
import numbers
import statistics
import time

import pytest

from grader.wire.codec import Trusted
from grader.judge import timing
from grader.judge.compare import CheckFailed
from grader.judge.inputs import randn, tensor

BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")
CUDA_ONLY = ("EFFICIENT_ATTENTION", "CUDNN_ATTENTION")   # no CPU kernel in any torch build
ROW_KEYS = ("N", "impl", "ms", "tflops", "peak_gb")
MAX_JSON_BYTES = 1 << 20
FLOAT32 = Trusted("dtype", params={"dtype": "float32"})    # torch.float32, built in the worker

# What a timer may report above the longest interval the grader's clock allows (the bound is
# exact up to scheduling): 2% + 50 us. An honest timer was seen 13 us over on a loaded 2-core
# machine (CI); summing the rep calls, timing the warm-up or a sync are off by far more.
OVER_REL, OVER_MS = 1.02, 0.05


def _is_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(float(x))


def _positive_ms(value, what: str) -> float:
    if not _is_number(value) or float(value) <= 0:
        raise CheckFailed(f"{what}: expected a positive, finite number of milliseconds, "
                          f"got {value!r:.80}")
    return float(value)


# ------------------------------------------------------------------------------ backend_probe


@pytest.mark.check("bench_attn.backend_probe")
def test_backend_probe(student, rng):
    sub = student()
    shape = (1, 2, int(rng.integers(17, 100)), 16)             # (B, H, N, D), N awkward
    q, k, v = (tensor(randn(rng, shape, "float32"), "float32") for _ in range(3))
    what = f"probe_backends(q, k, v) on CPU float32 tensors of shape {shape}"
    result = sub.call("probe_backends", q, k, v)
    got = result.value
    if not isinstance(got, dict):
        raise CheckFailed(f"{what}: expected a dict {{backend name: ms or None}}, got "
                          f"{type(got).__name__} {got!r:.80}")
    if set(got) != set(BACKENDS):
        raise CheckFailed(f"{what}: expected exactly the keys {list(BACKENDS)} (SDPBackend.name), "
                          f"got {sorted(got)}")
    wall_ms = result.wall_s * 1e3
    for name in BACKENDS:
        ms = got[name]
        if ms is None:
            continue
        ms = _positive_ms(ms, f"{what}[{name!r}]")
        if ms > wall_ms:
            raise CheckFailed(f"{what}[{name!r}]: reported {ms:.3f} ms, longer than the whole call "
                              f"took on the grader's clock ({wall_ms:.3f} ms)")
    for name in CUDA_ONLY:
        if got[name] is not None:
            raise CheckFailed(f"{what}[{name!r}]: expected None (this backend has no CPU kernel: "
                              f"forced with sdpa_kernel it raises RuntimeError), got {got[name]!r}")
    if got["MATH"] is None:
        raise CheckFailed(f"{what}['MATH']: expected a time in ms (the math backend runs on every "
                          f"device), got None. Is only RuntimeError caught, around each backend?")


# ------------------------------------------------------------------------------ timers
# Each timer gets a fresh workload whose "device" is simulated in this process (timing.Clock):
# durations drawn here, log-uniformly over 0.2 to 50 ms, never sent to the worker; every launch
# and synchronize logged on this clock. The grader counts the calls itself and bounds what a
# timer around them could have measured; the reported number must fall inside those bounds.

WORK_MS = (0.2, 50.0)       # how long one launch's work takes, drawn per call
COMPILE_MS = (30.0, 120.0)  # what the first call of a fresh workload pays before it returns


def _timed_call(sub, rng, fn_name: str, stream: timing.Stream, **kwargs):
    """Call fn_name(fn, **kwargs) with a fresh workload; kwargs may name "sync". Returns
    (result, stream, start, end) with start/end the grader's clock around the call."""
    with timing.Clock(sub.scratch, {"fn": stream}, rng) as clock:
        fn = Trusted("async_work", key="w", params=clock.params("fn"))
        if kwargs.get("sync") == "sync":
            kwargs["sync"] = Trusted("async_work", key="w", attr="synchronize",
                                     params=clock.params("fn"))
        start = time.perf_counter()
        result = sub.call(fn_name, fn, **kwargs)
        end = time.perf_counter()
    return result, stream, start, end


def _ms(x: float) -> str:
    return f"{x * 1e3:.3f} ms"


@pytest.mark.check("bench_attn.honest_timing")
def test_honest_timing(student, rng):
    sub = student()
    for _ in range(3):
        work_ms = timing.log_uniform(rng, *WORK_MS)
        compile_ms = timing.log_uniform(rng, *COMPILE_MS)
        warmup, rep = int(rng.integers(2, 4)), int(rng.integers(5, 8))
        what = f"time_proper(fn, warmup={warmup}, rep={rep}, sync=fn.synchronize)"
        case = (f"fn: a launch that returns at once and whose work takes {work_ms:.3f} ms; its "
                f"first call also compiles for {compile_ms:.0f} ms [seed {rng.seed}]")
        stream = timing.Stream(ms=work_ms, compile_ms=compile_ms)
        result, stream, start, end = _timed_call(sub, rng, "time_proper", stream,
                                                 warmup=warmup, rep=rep, sync="sync")
        got = _positive_ms(result.value, what)
        _judge_proper(stream, got, warmup, rep, start, end, what, case)


def _judge_proper(stream, got: float, warmup: int, rep: int, start: float, end: float,
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
                f"running on the device (their work ended {_ms(max(earlier) - launch.arrival)} "
                f"later) ({case}); that time is billed to this call",
                hint="sync() before starting the clock, so earlier queued work (the warm-up "
                     "calls) is not billed to the timed call")
        low, high = timing.interval_bounds(stream.events, launch, start, end, waited=waited)
        lows.append(low)
        highs.append(high)
    if got < min(lows) * 1e3 * 0.999:
        raise CheckFailed(
            f"{what}: reported {got:.4g} ms, but the work of every timed call took at least "
            f"{_ms(min(lows))} on the grader's clock ({case}): the clock stopped before the work "
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
            f"grader's clock (at most {_ms(high)} each; the work took {_ms(min(lows))}) ({case})",
            hint="time each of the rep calls on its own, warm-up outside the clock, and return "
                 "the median of their times (not their sum)")


@pytest.mark.check("bench_attn.dishonest_timers")
def test_dishonest_timers(student, rng):
    sub = student()
    # 4a: one cold call, no sync: the compile, not the work
    work_ms = timing.log_uniform(rng, *WORK_MS)
    compile_ms = timing.log_uniform(rng, *COMPILE_MS)
    case = (f"fn: its work takes {work_ms:.3f} ms after a launch that returns at once; its first "
            f"call compiles for {compile_ms:.0f} ms [seed {rng.seed}]")
    what = "time_once_no_sync(fn)"
    result, stream, start, end = _timed_call(sub, rng, "time_once_no_sync",
                                             timing.Stream(ms=work_ms, compile_ms=compile_ms))
    got = _positive_ms(result.value, what)
    _judge_no_sync(stream, got, 0, start, end, what, case, compile_ms)

    # 4b: warm, no sync: launch overhead only
    work_ms = timing.log_uniform(rng, *WORK_MS)
    warmup = int(rng.integers(2, 5))
    case = f"fn: its work takes {work_ms:.3f} ms after a launch that returns at once [seed {rng.seed}]"
    what = f"time_warm_no_sync(fn, warmup={warmup})"
    result, stream, start, end = _timed_call(sub, rng, "time_warm_no_sync",
                                             timing.Stream(ms=work_ms, compile_ms=compile_ms),
                                             warmup=warmup)
    got = result.value
    if not _is_number(got) or got < 0:
        raise CheckFailed(f"{what}: expected a number of milliseconds >= 0, got {got!r:.80}")
    _judge_no_sync(stream, float(got), warmup, start, end, what, case, compile_ms)


def _judge_no_sync(stream, got: float, warmup: int, start: float, end: float, what: str,
                   case: str, compile_ms: float) -> None:
    """One launch timed after `warmup` untimed ones, the clock stopped as soon as it returned."""
    launches = stream.launches()
    if len(launches) != warmup + 1:
        expected = "one cold call" if warmup == 0 else f"{warmup} warm-up calls, then one timed call"
        raise CheckFailed(f"{what}: the grader's clock counted {len(launches)} calls of fn; "
                          f"expected {warmup + 1}: {expected} ({case})",
                          hint="Break It 4: 4a times one cold call (no warm-up); 4b makes "
                               "`warmup` untimed calls, then times one")
    launch = launches[-1]
    low, high = timing.interval_bounds(stream.events, launch, start, end, waited=False)
    if got > high * 1e3 * OVER_REL + OVER_MS:
        synced = any(e.kind == "sync" and e.arrival >= launch.arrival for e in stream.events)
        if synced:
            why = ("the clock kept running through a synchronize: this timer must not sync, so "
                   "that it shows what an unsynchronised timing measures")
        elif warmup and got >= 0.9 * compile_ms:
            why = (f"that includes the {compile_ms:.0f} ms compile: make the warm-up calls before "
                   f"starting the clock")
        else:
            why = "only the one call belongs inside the clock"
        raise CheckFailed(f"{what}: reported {got:.4g} ms, more than the timed call could have "
                          f"measured on the grader's clock (at most {_ms(high)}) ({case})",
                          hint=f"Break It 4: {why}")
    if got < low * 1e3 * 0.999:
        raise CheckFailed(f"{what}: reported {got:.4g} ms, but the call took at least {_ms(low)} "
                          f"before it returned on the grader's clock ({case}); milliseconds, "
                          f"from just before the call to just after it",
                          hint="Break It 4a: the first call pays the compile: perf_counter right "
                               "before and right after the one call, times 1e3")


# ------------------------------------------------------------------------------ sweeps


def _sweep(sub, what: str, Ns, B, H, D, impls: dict, out_name: str,
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
            same = a == b or (_is_number(a) and _is_number(b)
                              and math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0))
            if not same:
                raise CheckFailed(f"{what}: {name} row {i} (N={r['N']}, impl={r['impl']!r}): "
                                  f"expected {key} = {b!r} as returned, got {a!r} in the file")


def _check_timed_row(row: dict, B: int, H: int, D: int, what: str, formula: bool = True) -> None:
    """A row of a run that fit: ms measured, tflops a number (from the formula when `formula`:
    sweep_rows grades it, oom_recorded only needs numbers), peak_gb None on CPU."""
    N, name = row["N"], row["impl"]
    where = f"{what}: row N={N}, impl={name!r}"
    ms = _positive_ms(row["ms"], f"{where}, ms")
    flops = 4 * B * H * N * N * D
    tflops = flops / ms / 1e9
    got = row["tflops"]
    if not _is_number(got) or got <= 0:
        raise CheckFailed(f"{where}: expected tflops, a positive number, got {got!r}")
    if formula and not math.isclose(got, tflops, rel_tol=1e-6):
        raise CheckFailed(f"{where}: expected tflops = 4*B*H*N^2*D / ms / 1e9 = {flops} / {ms!r} "
                          f"/ 1e9 = {tflops!r}, got {got!r}")
    peak = row["peak_gb"]
    if peak is not None and not (_is_number(peak) and peak >= 0):
        raise CheckFailed(f"{where}: expected peak_gb None (no CUDA here) or a number >= 0, "
                          f"got {peak!r}")


SWEEP_MS = (0.2, 3.0)        # per (impl, N): what one call of that impl takes, drawn here


@pytest.mark.check("bench_attn.sweep_rows")
def test_sweep_rows(student, rng):
    sub = student()
    Ns, B, H, D = [int(rng.integers(9, 33)), int(rng.integers(33, 65))], 1, 2, 16   # tiny, awkward
    # each impl is a workload that runs for a time drawn here per N (it returns when done, like a
    # CPU op), so each row's ms can be checked against the grader's own clock
    names = ("naive", "sdpa")
    streams = {name: timing.Stream(blocking=True, ms_range=SWEEP_MS) for name in names}
    what = (f"run_sweep(Ns={Ns}, B={B}, H={H}, D={D}, float32, device='cpu', "
            f"impls={list(names)}) [seed {rng.seed}]")
    with timing.Clock(sub.scratch, streams, rng) as clock:
        impls = {name: Trusted("async_work", params=clock.params(name)) for name in names}
        start = time.perf_counter()
        rows, _ = _sweep(sub, what, Ns, B, H, D, impls, "attn_bench.json")
        end = time.perf_counter()
    for row in rows:
        _check_timed_row(row, B, H, D, what)
    for row in rows:
        stream = streams[row["impl"]]
        launches = stream.launches(row["N"])
        where = f"{what}: row N={row['N']}, impl={row['impl']!r}"
        if not launches:
            raise CheckFailed(f"{where}: ms = {row['ms']!r}, but the grader's clock saw no call of "
                              f"{row['impl']} at N={row['N']}: every ms must come from timing "
                              f"that impl at that N",
                              hint="time each impl with time_proper(lambda: fn(q, k, v)) at each N")
        bounds = [timing.interval_bounds(stream.events, e, start, end, waited=False)
                  for e in launches]
        low = min(b[0] for b in bounds) * 1e3
        high = max(b[1] for b in bounds) * 1e3
        if not low * 0.999 <= row["ms"] <= high * OVER_REL + OVER_MS:
            raise CheckFailed(f"{where}: ms = {row['ms']:.4g}, but one call of {row['impl']} at "
                              f"N={row['N']} took {stream.by_n[row['N']]:.3f} ms of work, and any "
                              f"timing of it lies between {low:.3f} and {high:.3f} ms on the "
                              f"grader's clock",
                              hint="ms comes from time_proper on that impl at that N; is "
                                   "time_proper right (see honest_timing)?")


@pytest.mark.check("bench_attn.oom_recorded")
def test_oom_recorded(student, rng):
    sub = student()
    Ns, B, H, D, limit = [16, 48, 80], 1, 2, 16, 48
    # "big" raises torch.OutOfMemoryError from N = 48 on; the impl after it must still run
    impls = {"sdpa": Trusted("attention"), "big": Trusted("oom_above", params={"n": limit}),
             "after": Trusted("attention")}
    what = (f"run_sweep(Ns={Ns}, B={B}, H={H}, D={D}, float32, device='cpu', impls={list(impls)}), "
            f"where 'big' raises torch.OutOfMemoryError for N >= {limit}")
    # the file is sweep_rows' business: one mistake should cost one check
    rows, _ = _sweep(sub, what, Ns, B, H, D, impls, "attn_bench_oom.json", check_file=False)
    for row in rows:
        if row["impl"] == "big" and row["N"] >= limit:
            for key in ("ms", "tflops", "peak_gb"):
                if row[key] is not None:
                    raise CheckFailed(f"{what}: row N={row['N']}, impl='big' ran out of memory: "
                                      f"expected {key} = None, got {row[key]!r}")
        else:
            _check_timed_row(row, B, H, D, what, formula=False)


# ------------------------------------------------------------------------------------- gpu


@pytest.mark.check("bench_attn.gpu_sweep")
def test_gpu_sweep(student, gpu, workers):
    from grader.judge import ceilings

    sub = student()
    B, H, D = 1, 8, 64
    Ns = [1024, 2048, 4096]
    import torch

    # free memory is judged with nothing of the student's alive (a worker holding memory would
    # otherwise turn this check into "not run"); anything else on the GPU fails it
    timing.quiet_gpu(workers, "bench_attn.gpu_sweep")
    # never allocate what cannot fit (unified memory can stall the whole machine): estimate first
    Ns = [N for N in Ns if ceilings.fits(ceilings.naive_attention_bytes(B, H, N, D, "float16"), torch)]
    if len(Ns) < 2:
        pytest.skip("naive attention at N = 2048 does not fit in this GPU's free memory")
    impls = {name: Trusted("submission_function", params={"module": "bench_attn", "name": name})
             for name in ("naive", "sdpa")}
    rows = sub.call("run_sweep", Ns=Ns, B=B, H=H, D=D,
                    dtype=Trusted("dtype", params={"dtype": "float16"}), device="cuda",
                    impls=impls, out_path="attn_bench.json").value
    what = f"run_sweep(Ns={Ns}, B={B}, H={H}, D={D}, float16, cuda)"
    if not isinstance(rows, list) or len(rows) != 2 * len(Ns):
        raise CheckFailed(f"{what}: expected {2 * len(Ns)} rows (one per N and impl), got {rows!r:.200}")
    peak = {}
    for row in rows:
        _check_timed_row(row, B, H, D, what)
        if not _is_number(row["peak_gb"]) or row["peak_gb"] <= 0:
            raise CheckFailed(f"{what}: row {row}: expected peak_gb > 0 from peak_bytes on CUDA")
        peak[(row["impl"], row["N"])] = float(row["peak_gb"])
    for a, b in zip(Ns, Ns[1:]):
        growth = peak[("naive", b)] / peak[("naive", a)]
        if not 2.5 <= growth <= 5.0:
            raise CheckFailed(f"{what}: naive's peak memory grew {growth:.2f}x from N={a} to N={b}; "
                              f"expected about 4x (S and P are N x N)")
        flat = peak[("sdpa", b)] / peak[("sdpa", a)]
        if flat > 2.5:
            raise CheckFailed(f"{what}: sdpa's peak memory grew {flat:.2f}x from N={a} to N={b}; "
                              f"expected about 2x at most (only the output grows, linearly)")
