"""cpu checks for exercises/bench_attn.py (lesson: "Benchmarking a kernel without lying to
yourself", Build It's bench_attn.py): the backend probe and the sweep's rows.

No GPU is needed: the worker runs on CPU tensors. Sweeps get workloads that run a drawn time per
N on the grader's clock (clock.py; their rows' ms are bounded like the timers', judging.py),
trusted attention and tiny shapes; rows are checked against the formula and the JSON file the
student's code wrote (sweeps.py).
"""

from __future__ import annotations

import time

import pytest

from grader.exercises.bench_attn.clock import Clock, Stream, interval_bounds
from grader.exercises.bench_attn.judging import OVER_MS, OVER_REL, positive_ms
from grader.exercises.bench_attn.sweeps import call_sweep, check_timed_row
from grader.judge.compare import CheckFailed
from grader.judge.inputs import randn, tensor
from grader.wire.codec import Trusted

BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")
CUDA_ONLY = ("EFFICIENT_ATTENTION", "CUDNN_ATTENTION")   # no CPU kernel in any torch build


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
        ms = positive_ms(ms, f"{what}[{name!r}]")
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


SWEEP_MS = (0.2, 3.0)        # per (impl, N): what one call of that impl takes, drawn here


@pytest.mark.check("bench_attn.sweep_rows")
def test_sweep_rows(student, rng):
    sub = student()
    Ns, B, H, D = [int(rng.integers(9, 33)), int(rng.integers(33, 65))], 1, 2, 16   # tiny, awkward
    # each impl is a workload that runs for a time drawn here per N (it returns when done, like a
    # CPU op), so each row's ms can be checked against the grader's own clock
    names = ("naive", "sdpa")
    streams = {name: Stream(blocking=True, ms_range=SWEEP_MS) for name in names}
    what = (f"run_sweep(Ns={Ns}, B={B}, H={H}, D={D}, float32, device='cpu', "
            f"impls={list(names)}) [seed {rng.seed}]")
    with Clock(sub.scratch, streams, rng) as clock:
        impls = {name: Trusted("async_work", params=clock.params(name)) for name in names}
        start = time.perf_counter()
        rows, _ = call_sweep(sub, what, Ns, B, H, D, impls, "attn_bench.json")
        end = time.perf_counter()
    for row in rows:
        check_timed_row(row, B, H, D, what)
    for row in rows:
        stream = streams[row["impl"]]
        launches = stream.launches(row["N"])
        where = f"{what}: row N={row['N']}, impl={row['impl']!r}"
        if not launches:
            raise CheckFailed(f"{where}: ms = {row['ms']!r}, but the grader's clock saw no call of "
                              f"{row['impl']} at N={row['N']}: every ms must come from timing "
                              f"that impl at that N",
                              hint="time each impl with time_proper(lambda: fn(q, k, v)) at each N")
        bounds = [interval_bounds(stream.events, e, start, end, waited=False)
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
