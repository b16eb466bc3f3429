"""cpu checks for exercises/bench_attn.py (lesson: "Benchmarking a kernel without lying to
yourself", Build It's bench_attn.py): the backend probe and the sweep's rows.

No GPU is needed: the worker runs on CPU tensors. Sweeps get workloads that run a drawn time per
N on the grader's clock (reference.py; their rows' ms are bounded like the timers', judging.py),
trusted attention and tiny shapes; rows are checked against the formula and the JSON file the
student's code wrote (judging.py).
"""

from __future__ import annotations

import time

import pytest

from grader.exercises.bench_attn.judging import (OVER_MS, SWEEP_MS, again, call_sweep,
                                                 check_rows_on_clock, check_timed_row, fits_clock,
                                                 positive_ms)
from grader.exercises.bench_attn.reference import Clock, Stream, log_spread
from grader.judge.answers.compare import CheckFailed
from grader.judge.answers.inputs import randn, tensor
from grader.wire.codec import Trusted

BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")
# what one clocked sdpa of the probe takes on the grader's clock, drawn per backend and probe;
# and what timing it measures besides, before its launch: the real sdpa on a tensor subclass
# (workloads.clocked_query), 0.4 ms at most seen on a loaded 2-core machine
PROBE_MS = (0.3, 16.0)
PROBE_OVER_MS = OVER_MS + 0.5
CUDA_ONLY = ("EFFICIENT_ATTENTION", "CUDNN_ATTENTION")   # no CPU kernel in any torch build


@pytest.mark.check("bench_attn.backend_probe")
def test_backend_probe(student, rng):
    sub = student()
    shape = (1, 2, int(rng.integers(17, 100)), 16)             # (B, H, N, D), N awkward
    # twice, each backend's sdpa a factor of 2 or more slower or faster the second time
    # (log_spread): each time it reports must follow what timing that backend measured
    draws = {name: log_spread(rng, *PROBE_MS, 2) for name in (*BACKENDS, "ANY")}
    for probe in range(2):
        again(_probe_once, sub, rng, shape, {name: ms[probe] for name, ms in draws.items()})


def _probe_once(sub, rng, shape, work_ms: dict) -> None:
    k, v = (tensor(randn(rng, shape, "float32"), "float32") for _ in range(2))
    what = f"probe_backends(q, k, v) on CPU float32 tensors of shape {shape} [seed {rng.seed}]"
    # every sdpa on q also runs, after the real op, a time drawn here on the grader's clock, on
    # the stream of the backend that sdpa_kernel forced (grader.worker.workloads.clocked_query):
    # each backend's reported time is judged on what timing that backend measured
    streams = {name: Stream(blocking=True, ms=ms) for name, ms in work_ms.items()}
    with Clock(sub.scratch, streams, rng) as clock:
        q = Trusted("clocked_query", params={"socket": clock.name, "shape": list(shape),
                                             "seed": int(rng.integers(1 << 31))})
        start = time.perf_counter()
        result = sub.call("probe_backends", q, k, v)
        end = time.perf_counter()
    got = result.value
    if not isinstance(got, dict):
        raise CheckFailed(f"{what}: expected a dict {{backend name: ms or None}}, got "
                          f"{type(got).__name__} {got!r:.80}")
    if set(got) != set(BACKENDS):
        raise CheckFailed(f"{what}: expected exactly the keys {list(BACKENDS)} (SDPBackend.name), "
                          f"got {sorted(got)}")
    for name in CUDA_ONLY:
        if got[name] is not None:
            raise CheckFailed(f"{what}[{name!r}]: expected None (this backend has no CPU kernel: "
                              f"forced with sdpa_kernel it raises RuntimeError), got {got[name]!r}")
    if got["MATH"] is None:
        raise CheckFailed(f"{what}['MATH']: expected a time in ms (the math backend runs on every "
                          f"device), got None. Is only RuntimeError caught, around each backend?")
    for name in BACKENDS:
        ran = len(streams[name].launches())
        if got[name] is None and ran:
            raise CheckFailed(f"{what}[{name!r}]: reported None, but sdpa ran {ran} times under "
                              f"sdpa_kernel(SDPBackend.{name}) on the grader's clock: a backend "
                              f"that runs is reported with its time",
                              hint="record None only for a backend whose sdpa raised "
                                   "RuntimeError; time the others")
        if got[name] is not None:
            _judge_probe_time(positive_ms(got[name], f"{what}[{name!r}]"), streams[name], start,
                              end, f"{what}[{name!r}]", name)


def _judge_probe_time(ms: float, stream: Stream, start: float, end: float, what: str,
                      backend: str) -> None:
    """A backend's time must be what timing sdpa(q, k, v) under sdpa_kernel(backend) measured."""
    launches = stream.launches()
    if not launches:
        raise CheckFailed(f"{what}: reported {ms:.4g} ms, but no scaled_dot_product_attention on "
                          f"the given q ran under sdpa_kernel(SDPBackend.{backend}): the time must "
                          f"come from timing sdpa(q, k, v) with that backend forced",
                          hint="with sdpa_kernel(backend): time_proper(sdpa, q, k, v)")
    outside = fits_clock(ms, stream, launches, start, end, over_ms=PROBE_OVER_MS)
    if outside:
        low, high, error = outside
        raise error(f"{what}: reported {ms:.4g} ms, but each sdpa call under {backend} took "
                    f"{stream.ms:.3f} ms of work on the grader's clock, and timing one measures "
                    f"between {low:.3f} and {high:.3f} ms (a little more for the timer itself)",
                    hint="the time of each backend comes from time_proper around sdpa with "
                         "that backend forced; is time_proper right (see honest_timing)?")


@pytest.mark.check("bench_attn.sweep_rows")
def test_sweep_rows(student, rng):
    again(_sweep_rows, student(), rng)


def _sweep_rows(sub, rng):
    Ns, B, H, D = [int(rng.integers(9, 33)), int(rng.integers(33, 65))], 1, 2, 16   # tiny, awkward
    # each impl is a workload that runs for a time drawn here per N (it returns when done, like a
    # CPU op), the Ns' times a factor of 2 or more apart, so each row's ms can be checked against
    # the grader's own clock, and must follow it
    names = ("naive", "sdpa")
    streams = {name: Stream(blocking=True, by_n=dict(zip(Ns, log_spread(rng, *SWEEP_MS, len(Ns)))))
               for name in names}
    what = (f"run_sweep(Ns={Ns}, B={B}, H={H}, D={D}, float32, device='cpu', "
            f"impls={list(names)}) [seed {rng.seed}]")
    with Clock(sub.scratch, streams, rng) as clock:
        impls = {name: Trusted("async_work", params=clock.params(name)) for name in names}
        start = time.perf_counter()
        rows, _ = call_sweep(sub, what, Ns, B, H, D, impls, "attn_bench.json")
        end = time.perf_counter()
    for row in rows:
        check_timed_row(row, B, H, D, what)
    check_rows_on_clock(rows, streams, start, end, what)
