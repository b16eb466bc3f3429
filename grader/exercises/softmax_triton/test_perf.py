"""perf check for exercises/softmax_triton.py: GB/s against the copy bandwidth measured in this
run, and the speed-up over softmax_eager, on CUDA (mode "cuda"), every timed call's output
verified (grader.judge.perf.timed_requests). Inputs are drawn by torch's generator in the worker
and again here (grader.judge.answers.gpu.seeded_inputs)."""

from __future__ import annotations

import pytest

from grader.judge.answers.compare import assert_close

BANDWIDTH_SHAPE = (32768, 4096)   # 256 MiB of fp16: far past any L2


def _eager(x):
    """The lesson's softmax_eager, run here as the baseline (the student's copy could be slowed)."""
    m = x.max(dim=1, keepdim=True).values
    e = (x - m).exp()
    return e / e.sum(dim=1, keepdim=True)


@pytest.mark.check("softmax_triton.bandwidth")
def test_bandwidth(student, rng, gpu, credit, workers, after_timing):
    from grader.judge.perf import baselines, verdicts
    from grader.judge.answers import gpu as g

    sub = student()
    rows, cols = BANDWIDTH_SHAPE
    (marker,), (x,) = g.seeded_inputs(rng, (rows, cols), "float16", count=1)
    moved = 2 * x.numel() * x.element_size()          # read every element once, write it once

    def gated():
        # the gate (traced and profiled), after the timing: its profiler (CUPTI) stays attached
        # to the process it ran in and slows every later launch there
        traced = sub.call("softmax", marker, opts={"trace": True})
        assert_close(traced.value, g.softmax_reference(x), what="softmax(x)", dtype="float16",
                     case=f"{rows} x {cols}", seed=rng.seed)

    # Every timed call refills x with fresh values first and reduces its output to a checksum
    # after: the same per-call costs for the student and for softmax_eager, taken off both
    # (grader.judge.perf.baselines.timed_against)
    t, = baselines.timed_against(sub, rng, gpu, workers, "softmax",
                              [(marker, x, moved, f"softmax(x) on {rows} x {cols} float16")],
                              "float16", _eager, lambda i: g.softmax_reference(i[0]),
                              gated=gated, after_timing=after_timing)
    speedup = t.base / t.mine
    p = gpu.profile
    tally = verdicts.Tally("softmax_triton", p)
    tally.reading("bandwidth", t.mine_ms, t.of_copy, less=t.harness, weight=0.5)
    tally.ratio("vs_eager", t.base_ms, t.mine_ms, less=t.harness, weight=0.5)
    credit.set(tally.fraction, f"softmax on {rows} x {cols} float16: {t.mine:.3f} ms = {t.gbs:.0f} GB/s "
               f"(bytes = 2 x rows x cols x 2), {t.fraction:.0%} of the copy bandwidth measured in "
               f"this run ({t.copy:.0f} GB/s; {verdicts.terms('softmax_triton', 'bandwidth', p)}); "
               f"{speedup:.1f}x faster than softmax_eager ({t.base:.3f} ms; "
               f"{verdicts.terms('softmax_triton', 'vs_eager', p, 'x')}); every timed call's output checked "
               f"(per call, {t.harness:.3f} ms of refill and checksum taken out){t.note}",
               undecided=tally.undecided())
