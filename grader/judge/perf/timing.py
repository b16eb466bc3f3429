"""Trusted-side timing: the grader's own clock, never the student's.

Two tools, both run in the trusted process:

    per_call_ms      milliseconds per call of a function run R times back to back in one request,
                     from two requests that differ only in R, timed on this process's clock: a
                     Reading, the median of its samples with their range.
    time_cuda        median ms of fn() with CUDA events, warm-up and an L2 flush: for PyTorch
                     baselines and ceilings run in this process (never for untrusted code);
                     it lives in grader.judge.perf.events.

The requests it times are the student's side (grader.judge.perf.timed_requests.Requests: timed
requests in its worker, every output verified) or the baselines' side, the same harness run
here (grader.judge.perf.baselines: local_request, harness_gpu_ms, timed_against); below_floor
refuses a time no kernel can reach.
"""

from __future__ import annotations

import contextlib
import math
import time


# ================================================================== GPU: per-call time of a request


class Reading(float):
    """A time per call in ms: the median of per_call_ms's samples, with `low` and `high`, the
    range of the middle three (all three when there are three). The range is how far this
    run's readings leave the value open: a check whose credit changes across it has not been
    decided by the measurement (grader.judge.perf.verdicts.Tally). Arithmetic gives plain floats."""

    samples: tuple = ()   # sorted

    @classmethod
    def of(cls, samples) -> "Reading":
        ordered = tuple(sorted(samples))
        reading = cls(ordered[len(ordered) // 2])
        reading.samples = ordered
        return reading

    @property
    def low(self) -> float:
        return self.samples[max(0, (len(self.samples) - 3) // 2)]

    @property
    def high(self) -> float:
        return self.samples[-1 - max(0, (len(self.samples) - 3) // 2)]


def span(t, less: float = 0.0) -> tuple[float, float]:
    """(low, high) of a Reading's range (a plain float: itself twice), less `less` (a cost both
    sides of a comparison pay), kept above zero so that ratios of spans stay finite; NaN stays
    NaN (it earns no credit: verdicts.linear)."""
    ends = (getattr(t, end, t) - less for end in ("low", "high"))
    return tuple(x if math.isnan(x) or x > 1e-9 else 1e-9 for x in ends)


def ratio_span(a: tuple, b: tuple) -> tuple[float, float]:
    """The smallest and largest a / b for a in span `a` and b in span `b`."""
    return a[0] / b[1], a[1] / b[0]


SAMPLES_MAX = 7   # per_call_ms's samples at most: two more at a time while `settled` says no


def per_call_ms(request, first: int = 2, more: int = 10, target_ms: float = 150.0,
                max_more: int = 2000, settled=None) -> Reading:
    """Milliseconds per call of `request(repeat)` on this process's clock.

    request(repeat) runs the function 1 + repeat times back to back and synchronizes. The
    fixed costs (IPC, launch of the first call, the final synchronize) cancel in the difference
    between two repeat counts; `more` grows until the difference spans about `target_ms`, up to
    `max_more`, or shrinks as far as one call when `more` calls span several times that (a slow
    kernel; then `first` goes to none as well: every sample costs 3 calls, not 3 + 3 + 10, and
    the probe that sizes `more` takes as few calls as the base's time says span the target).
    Three samples, the median kept (a Reading); while `settled(reading)` (the check's: would
    the credit be the same anywhere in the reading's range?) says no, two more, up to
    SAMPLES_MAX. Without `settled`, always three."""
    def wall(repeat: int) -> float:
        start = time.perf_counter()
        got = request(repeat)      # a request may time itself (float ms) to leave out its checks
        return got if isinstance(got, float) else (time.perf_counter() - start) * 1e3

    # the warm-up and the probe that sizes `more` give no time that counts: a Requests skips
    # checking their outputs (timed_requests.Requests.scored), which only guard the times that do
    scored = getattr(request, "scored", None)
    with scored(False) if scored is not None else contextlib.nullcontext():
        wall(first)   # warm: compilation, allocator, caches
        base = wall(first)
        # a base that alone spans twice the target (a slow kernel) probes with only as many
        # calls as should span it, estimated from the base (its fixed cost in it: never too
        # many); a probe whose calls come out far faster than the base said (the base was a
        # fixed cost's jitter, not the kernel) is taken again in full
        probe = more if base <= 2 * target_ms else \
            min(more, math.ceil(2 * target_ms * (first + 1) / base))
        extra = max(1.0, wall(first + probe) - base)
        if probe < more and extra / probe < 0.5 * base / (first + 1):
            probe, extra = more, max(1.0, wall(first + more) - base)
        more = probe
    if extra < target_ms:
        more = min(max_more, int(more * target_ms / extra) + 1)
    elif extra > 2 * target_ms:     # sized on `more` calls' time: a fixed cost's jitter can't
        more = max(1, math.ceil(more * target_ms / extra))    # make a fast kernel look slow
        first = 0 if more == 1 else first

    def sample() -> float:
        base = wall(first)
        return (wall(first + more) - base) / more

    samples = [sample() for _ in range(3)]
    reading = Reading.of(samples)
    while settled is not None and len(samples) < SAMPLES_MAX and not settled(reading):
        samples += [sample(), sample()]
        reading = Reading.of(samples)
    return reading   # (may be <= 0 when the calls took no time: judge it)


def below_floor(ms: float, floor_ms: float, what: str) -> str | None:
    """A time no real kernel can reach (less than the work at the measured ceiling, with 10%
    to spare): the message saying so, else None."""
    if ms > 0 and ms >= floor_ms / 1.1:
        return None
    return (f"{what}: {ms:.4f} ms per call is below the roofline floor of {floor_ms:.4f} ms "
            f"(the work at this GPU's measured ceiling): impossible for a kernel that computes "
            f"its output, so no speed points")
