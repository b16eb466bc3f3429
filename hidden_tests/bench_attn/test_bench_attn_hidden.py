"""Hidden checks for bench_attn: time_proper with its own defaults (warmup=5, rep=20, no sync
argument) on work that runs inside the call, and with rep = 1 and an even rep. A timer that
hard-codes the public checks' warmup and rep, or reads them from anywhere but its arguments,
fails here; the grader's clock counts the calls and bounds the answer by what they took, as in
honest_timing."""

from __future__ import annotations

import pytest

from grader.exercises.bench_attn.judging import (WORK_MS, again, judge_proper, positive_ms,
                                                 timed_call)
from grader.exercises.bench_attn.reference import Stream, log_uniform


@pytest.mark.check("bench_attn.hidden_timer_arguments")
def test_hidden_timer_arguments(student, rng):
    sub = student()
    # defaults: fn's work runs inside the call (like a CPU op), so no sync is needed
    again(_defaults, sub, rng)
    # launches with asynchronous work, rep = 1 and an even rep
    for warmup, rep in ((1, 1), (3, 4)):
        again(_asynchronous, sub, rng, warmup, rep)


def _defaults(sub, rng):
    work_ms = log_uniform(rng, 0.2, 3.0)
    stream = Stream(ms=work_ms, blocking=True)
    result, stream, start, end = timed_call(sub, rng, "time_proper", stream)
    what = "time_proper(fn) with its defaults (warmup=5, rep=20, sync=None)"
    case = f"fn: each call runs for {work_ms:.3f} ms before it returns [seed {rng.seed}]"
    judge_proper(stream, positive_ms(result.value, what), 5, 20, start, end, what, case)


def _asynchronous(sub, rng, warmup: int, rep: int):
    work_ms = log_uniform(rng, *WORK_MS)
    stream = Stream(ms=work_ms, compile_ms=log_uniform(rng, 5.0, 40.0))
    result, stream, start, end = timed_call(sub, rng, "time_proper", stream, warmup=warmup,
                                            rep=rep, sync="sync")
    what = f"time_proper(fn, warmup={warmup}, rep={rep}, sync=fn.synchronize)"
    case = f"fn: a launch whose work takes {work_ms:.3f} ms after it returns [seed {rng.seed}]"
    judge_proper(stream, positive_ms(result.value, what), warmup, rep, start, end, what, case)
