"""flash_backward's perf checks: flash_fwd and flash_bwd against the fastest SDPA backend, causal
against non-causal time, and the memory beyond the outputs. All four read one measurement per
grading run (measure.py says how it is made); a pass whose calls failed there fails here, and
one whose timed outputs are wrong fails here when they are verified, after the timing."""

from __future__ import annotations

import pytest

from grader.exercises.flash_backward.measure import (B_PERF, D_PERF, FUNCTIONS, H_PERF, PERF_N,
                                                     Perf, measure)
from grader.judge.perf.baselines import attention_flops
from grader.judge.answers.compare import CheckFailed

EXTRA_COPIES = 6                       # memory beyond the outputs: up to 6 tensors the size of q,
EXTRA_MIB = 64                         # plus 64 MiB (allocator rounding, a few numbers per row)


def _speed(perf: Perf, name: str, credit, gpu, later) -> None:
    from grader.judge.perf import verdicts

    perf.failure([name])
    later(perf.verified([name]))
    prof = gpu.profile
    tally, lines = verdicts.Tally("flash_backward", prof), []
    for N in PERF_N:
        for causal in (False, True):
            ms = perf.ms[(name, N, causal)]
            base_ms, backend = perf.base[(N, causal)][name]
            if not (base_ms < float("inf")):   # fail closed: no baseline, no credit
                raise CheckFailed(f"no SDPA backend ran at N={N}{', causal' if causal else ''} "
                                  f"here, so there is no baseline to compare with; no speed points")
            ratio = ms / base_ms
            tally.reading("vs_sdpa", ms, lambda t: t / base_ms)
            tflops = attention_flops(B_PERF, H_PERF, N, D_PERF, causal, name == "bwd") / ms / 1e9
            lines.append(f"N={N}{' causal' if causal else ''}: {ms:.3f} ms ({tflops:.0f} TFLOP/s) "
                         f"vs SDPA {backend} {base_ms:.3f} ms = {ratio:.2f}x")
    fn = FUNCTIONS[name]
    credit.set(tally.fraction,
               f"{fn}, B={B_PERF}, H={H_PERF}, D={D_PERF}, float16: " + "; ".join(lines)
               + f". Against the fastest SDPA backend's "
               f"{'backward' if name == 'bwd' else 'forward'}, {verdicts.terms('flash_backward', 'vs_sdpa', prof, 'x')}; "
               f"FLOPs = 4*B*H*N^2*D{' x 2.5' if name == 'bwd' else ''}, halved when causal; every "
               f"timed output checked{perf.note}", undecided=tally.undecided())


@pytest.mark.check("flash_backward.forward_speed")
def test_forward_speed(student, rng, gpu, credit, workers, later):
    _speed(measure(student, rng, gpu, workers), "fwd", credit, gpu, later)


@pytest.mark.check("flash_backward.backward_speed")
def test_backward_speed(student, rng, gpu, credit, workers, later):
    _speed(measure(student, rng, gpu, workers), "bwd", credit, gpu, later)


@pytest.mark.check("flash_backward.causal_skips_blocks")
def test_causal_skips_blocks(student, rng, gpu, credit, workers, later):
    from grader.judge.perf import verdicts

    perf = measure(student, rng, gpu, workers)
    perf.failure(["fwd", "bwd"])
    later(perf.verified(["fwd", "bwd"]))
    tally, lines = verdicts.Tally("flash_backward", gpu.profile), []
    N = PERF_N[-1]
    for name, fn in FUNCTIONS.items():
        causal, full = perf.ms[(name, N, True)], perf.ms[(name, N, False)]
        ratio = causal / full
        tally.ratio("causal_half", causal, full)
        lines.append(f"{fn} N={N}: causal {perf.ms[(name, N, True)]:.3f} ms / non-causal "
                     f"{perf.ms[(name, N, False)]:.3f} ms = {ratio:.2f}")
    again = " and ".join(FUNCTIONS[p] for p in perf.again)
    credit.set(tally.fraction,
               "; ".join(lines) + f". Causal attention does half the work: of the non-causal "
               f"time, {verdicts.terms('flash_backward', 'causal_half', gpu.profile)}"
               + (f". The first readings of {again} left this open: both times taken twice, "
                  f"the faster of each kept" if again else ""),
               undecided=tally.undecided())


@pytest.mark.check("flash_backward.memory_linear")
def test_memory_linear(student, rng, gpu, credit, workers, later):
    from grader.judge.answers import gpu as g

    perf = measure(student, rng, gpu, workers)
    perf.failure(["fwd", "bwd"])
    later(perf.verified(["fwd", "bwd"]))
    passed, lines = 0, []
    for N in PERF_N:
        q_bytes = B_PERF * H_PERF * N * D_PERF * 2
        outputs = {"fwd": q_bytes + B_PERF * H_PERF * N * 4, "bwd": 3 * q_bytes}
        allowed = EXTRA_COPIES * q_bytes + EXTRA_MIB * g.MIB
        for name, fn in FUNCTIONS.items():
            extra = max(perf.peak[(name, N, c)] for c in (False, True)) - outputs[name]
            passed += extra <= allowed
            lines.append(f"{fn} N={N}: {extra / g.MIB:.0f} MiB beyond its outputs")
    credit.set(passed / (2 * len(PERF_N)),
               "; ".join(lines) + f" (allowed: {EXTRA_COPIES} tensors the size of q + "
               f"{EXTRA_MIB} MiB, {EXTRA_COPIES * 64 + EXTRA_MIB} MiB at N=8192; an N x N score "
               f"matrix in fp16 adds {2 * B_PERF * H_PERF * 8192 ** 2 * 2 / 2**30:.0f} GiB there)")
