"""perf check for exercises/softmax_long.py: GB/s against the copy bandwidth measured in this
run, and time against torch.softmax timed in the same run, at several widths, float16, on CUDA
(mode "cuda"); every timed call's output verified (grader.judge.perf.timed_requests). Inputs are
drawn by torch's generator in the worker and again here (grader.judge.answers.gpu.seeded_inputs)."""

from __future__ import annotations

import pytest

from grader.judge.answers.compare import assert_close

# (rows, cols, bandwidth band of rows.py): 2^27 float16 elements each (256 MiB read, 256 written),
# far past any L2 and long enough that a recorded timed call's CPU work hides behind its kernel
# (softmax_triton's size); short rows several per program, a one-tile width, long rows read twice
WIDTHS = ((524288, 256, "bandwidth"), (32768, 4096, "bandwidth"), (2048, 65536, "bandwidth_long"))


def _torch_softmax(x):
    import torch

    return torch.softmax(x, dim=-1)


@pytest.mark.check("softmax_long.bandwidth")
def test_bandwidth(student, rng, gpu, credit, workers, after_timing):
    from grader.judge.perf import baselines, verdicts
    from grader.judge.answers import gpu as g

    sub = student()
    inputs = []
    for rows, cols, band in WIDTHS:
        (marker,), (x,) = g.seeded_inputs(rng, (rows, cols), "float16", count=1)
        inputs.append((marker, x, band))

    def gated():
        # the gate (traced and profiled) at every width, after the timing: its profiler
        # (CUPTI) slows every later launch in the process it ran in
        for marker, x, _ in inputs:
            traced = sub.call("softmax", marker, opts={"trace": True})
            assert_close(traced.value, g.softmax_reference(x), what="softmax(x)", dtype="float16",
                         case=f"{x.shape[0]} x {x.shape[1]}", seed=rng.seed)

    timed = baselines.timed_against(
        sub, rng, gpu, workers, "softmax",
        [(marker, x, 2 * x.numel() * x.element_size(),   # read every element once, write it once
          f"softmax(x) on {x.shape[0]} x {x.shape[1]} float16") for marker, x, _ in inputs],
        "float16", _torch_softmax, lambda i: g.softmax_reference(i[0]), gated=gated,
        after_timing=after_timing)
    tally = verdicts.Tally("softmax_long", gpu.profile)
    notes = [_credit(tally, t, x, band, gpu) for t, (_, x, band) in zip(timed, inputs)]
    credit.set(tally.fraction, "; ".join(notes) + " (bytes = 2 x rows x cols x 2; every "
               "timed call's output checked)", undecided=tally.undecided())


def _credit(tally, t, x, band: str, gpu) -> str:
    """One width's credit, into `tally`, and its note: its GB/s on `band` and its time against
    torch.softmax's, both less the harness's refill and checksum, which both pay
    (grader.judge.perf.baselines.timed_against)."""
    from grader.judge.perf import verdicts

    cols = x.shape[1]
    ratio = t.mine / t.base
    p = gpu.profile
    width = verdicts.Tally("softmax_long", p)   # half bandwidth, half against torch.softmax
    width.reading(band, t.mine_ms, t.of_copy, less=t.harness, weight=0.5)
    width.ratio("vs_torch", t.mine_ms, t.base_ms, less=t.harness, weight=0.5)
    tally.include(width)
    return (f"{cols} columns: {t.mine:.3f} ms = {t.gbs:.0f} GB/s, {t.fraction:.0%} of copy "
            f"({t.copy:.0f} GB/s; {verdicts.terms('softmax_long', band, p)}), "
            f"{ratio:.2f}x torch.softmax's time ({t.base:.3f} ms; "
            f"{verdicts.terms('softmax_long', 'vs_torch', p, 'x')}){t.note}")
