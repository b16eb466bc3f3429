"""flash_decode's perf checks: K and V bandwidth against the measured copy bandwidth, and the
speed-up of splitting the keys at B = 1.

Every timed call's output is checked (grader.judge.perf.timed_requests.Requests), and each size
is checked in full by one gated call, after the check's timing (`after_timing`): the gate's profiler
slows every later launch in the process it ran in, so nothing is timed there after it. The grader's copies
of K and V (up to 16 GiB a size) are drawn again from their seeds when they are needed.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.exercises.flash_decode.reference import decode_same_precision, gpu_decode_reference
from grader.judge.answers.compare import CheckFailed, assert_close
from grader.judge.machine.devices import GB
from grader.judge.answers.inputs import tensor

PERF_B, PERF_HQ, PERF_D = 8, 32, 128
# (Hkv, L): each reads at least 1 GiB of K and V, about 1 ms per call on the H200 at its copy
# bandwidth. A call launched from Python costs 0.25-0.5 ms of host time (refill, the student's
# launches, checksum), so a smaller size times the host, not the kernel: (8, 32K), a quarter of
# that, measured 0.26 to 0.50 ms across runs of the same solution.
PERF_CASES = ((32, 32768), (8, 131072), (32, 131072))
# K and V of one size take at most this share of the GPU's memory: the worker draws them in
# float32 first (twice their size), and its replay and the grader's reference draw them again;
# at 17 GiB the largest size left an 80 GiB H100 without room (it keeps 16 GiB on an H200)
MEMORY_SHARE = 8
SPEEDUP_SHAPE = (1, 32, 8, 128)       # B, Hq, Hkv, D; L from the copy bandwidth (speedup_length)
SPEEDUP_MIN_L, SPEEDUP_MAX_L = 131072, 1048576
SPEEDUP_MIN_MS = 1.0   # num_splits=None reads K and V for at least this long at copy bandwidth
# Reading alone outruns a read-plus-write copy (SDPA's cuDNN reads at 1.05-1.07 of the copy
# bandwidth on the H200, issue 13): the roofline floor for reading K and V is their bytes at
# READ_OVER_COPY times the measured copy bandwidth (below_floor adds 10% to spare).
READ_OVER_COPY = 1.25


def speedup_length(copy_gbs: float) -> int:
    """L of the splits speed-up case: the smallest power of two from 128K up whose K and V take
    SPEEDUP_MIN_MS to read at the measured copy bandwidth (at most 1M), so that the split
    kernel's time is the GPU's and not the launches' (1M on the H200, 128K on a GB10); 128K
    when no copy bandwidth was measured (its floor check says so)."""
    B, _, Hkv, D = SPEEDUP_SHAPE
    L = SPEEDUP_MIN_L
    if not (copy_gbs == copy_gbs and copy_gbs > 0):
        return L
    while L < SPEEDUP_MAX_L and 2 * B * Hkv * L * D * 2 / (copy_gbs * 1e6) < SPEEDUP_MIN_MS:
        L *= 2
    return L


def perf_cases(total_bytes: float) -> list[tuple[int, int]]:
    """PERF_CASES with L halved (down to 32K) where K and V would take more than 1 /
    MEMORY_SHARE of the GPU's `total_bytes` (0: unknown, kept as they are)."""
    cases = []
    for Hkv, L in PERF_CASES:
        while total_bytes and L > 32768 and \
                2 * PERF_B * Hkv * L * PERF_D * 2 * MEMORY_SHARE > total_bytes:
            L //= 2
        cases.append((Hkv, L))
    return cases


def _decode_inputs(rng, B, Hq, Hkv, L, D):
    """Markers for the worker (q, k_cache, v_cache drawn there, seq_lens = L everywhere), and a
    function that draws the same tensors here on the GPU: [q, k, v, seq_lens]."""
    from grader.judge.answers import gpu as g

    markers = [g.seeded_marker(rng, (B, Hq, D), "float16"),
               *(g.seeded_marker(rng, (B, Hkv, L, D), "float16") for _ in range(2))]
    lens = np.full(B, L, np.int32)

    def tensors():
        return [*(g.drawn(m) for m in markers), lens]
    return [*markers, tensor(lens, "int32", device="cuda", poison=0.0)], tensors


def _decode_requests(sub, rng, markers, tensors, what, **kwargs):
    """The student's flash_decode as timed requests (grader.judge.perf.timed_requests.Requests):
    q refilled from a fresh seed before every call, every call's output reduced to a checksum,
    checked afterwards against the reference at the same q (and the last output at random in
    full)."""
    from grader.judge.perf import timed_requests

    return timed_requests.Requests(sub, "flash_decode", markers, kwargs=kwargs, rng=rng,
                                   inputs=tensors, dtype="float16", what=what,
                                   reference=lambda i: gpu_decode_reference(*i))


def _checked_once(sub, rng, markers, tensors, what, case, **kwargs):
    """One gated call (traced and profiled: only the student's Triton kernels and copies run)
    whose output is checked in full, after everything of the check is timed (`after_timing`)."""
    def check():
        import torch

        r = sub.call("flash_decode", *markers, opts={"sync": True}, **kwargs)
        inputs = tensors()   # (drawn outside the try: a draw that fails says why, as it is)
        try:
            assert_close(r.value, gpu_decode_reference(*inputs), what=what, dtype="float16",
                         baseline=decode_same_precision(*inputs), case=case, seed=rng.seed)
        finally:   # gigabytes the next call's worker or replay may need
            del inputs, r
            torch.cuda.empty_cache()
    return check


def _harness_ms(workers, rng, what) -> tuple[float, str]:
    """The per-call cost of the timing harness (q refilled before, a checksum after), measured
    here on trusted code with nothing of the student's alive (quiet_gpu.quiet_gpu), after the
    student's timed calls; the student cannot skip it, since every timed output is verified."""
    import torch

    from grader.judge.perf import baselines, quiet_gpu

    note = quiet_gpu.quiet_gpu(workers, what)
    q = torch.empty((PERF_B, PERF_HQ, PERF_D), dtype=torch.float16, device="cuda")
    harness = baselines.harness_gpu_ms(q)   # its GPU time, the smaller of two measurements
    if not (harness == harness and 0 <= harness < 1e3):   # fail closed: no baseline, no credit
        raise CheckFailed(f"{what}: the timing harness measured {harness} ms per call here, so "
                          f"no time can be judged; no bandwidth points")
    return harness, note


@pytest.mark.check("flash_decode.bandwidth")
def test_bandwidth(student, rng, gpu, credit, workers, after_timing):
    from grader.judge.perf import baselines, timing, verdicts

    what = "flash_decode.bandwidth"
    copy = gpu.ceiling("copy_gbs")   # measured once per run, with no student process alive
    if not (copy == copy and copy > 0):
        raise CheckFailed(f"{what}: no copy bandwidth was measured on this GPU; no bandwidth points")
    sub = student()
    timed = []
    for Hkv, L in perf_cases(gpu.info.get("total_memory_gb", 0) * GB):
        case = f"B={PERF_B}, Hq={PERF_HQ}, Hkv={Hkv}, L={L}, D={PERF_D}, float16"
        markers, tensors = _decode_inputs(rng, PERF_B, PERF_HQ, Hkv, L, PERF_D)
        call = f"flash_decode(q, k_cache, v_cache, seq_lens) at {case}"
        reqs = _decode_requests(sub, rng, markers, tensors, call)
        nbytes = 2 * PERF_B * Hkv * L * PERF_D * 2       # K and V, fp16, each read once
        # more samples while the credit differs across the readings (the harness's cost, a
        # small part, is measured afterwards)
        of_copy = baselines.of_copy(nbytes, copy)
        timed.append((Hkv, L, call, nbytes, of_copy, timing.per_call_ms(
            reqs, settled=verdicts.settles("flash_decode", "bandwidth", of_copy, gpu.profile))))
        after_timing(reqs.checked())
        # the gate, after everything is timed: its profiler (CUPTI) stays attached to the
        # process it ran in and slows every later launch there
        after_timing(_checked_once(sub, rng, markers, tensors,
                            "flash_decode(q, k_cache, v_cache, seq_lens)", case))
    harness, note = _harness_ms(workers, rng, what)
    tally, lines = verdicts.Tally("flash_decode", gpu.profile), []
    for Hkv, L, call, nbytes, of_copy, reading in timed:
        # the floor judges the time as measured: the harness's cost is an estimate, and taking
        # it off first once put a correct kernel below the floor (0.172 ms against 0.203)
        impossible = timing.below_floor(reading, nbytes / (READ_OVER_COPY * copy) / 1e6, call)
        if impossible:
            raise CheckFailed(impossible)
        ms = reading - harness
        if ms <= 0:
            raise CheckFailed(f"{call}: {ms:.4f} ms per call, impossible; no bandwidth points")
        gbs = nbytes / ms / 1e6
        tally.reading("bandwidth", reading, of_copy, less=harness)
        lines.append(f"Hkv={Hkv}, L={L}: {ms:.3f} ms = {gbs:.0f} GB/s = {gbs / copy:.2f} of copy")
    credit.set(tally.fraction,
               f"B={PERF_B}, Hq={PERF_HQ}, D={PERF_D}, float16: " + "; ".join(lines)
               + f". Bytes = 2 * B * Hkv * L * D * 2 (K and V read once); copy bandwidth measured "
               f"in this run: {copy:.0f} GB/s; of it, "
               f"{verdicts.terms('flash_decode', 'bandwidth', gpu.profile)}; every timed call's output checked (per call, "
               f"{harness:.3f} ms of refill and checksum taken out){note}",
               undecided=tally.undecided())


@pytest.mark.check("flash_decode.splits_speedup")
def test_splits_speedup(student, rng, gpu, credit, workers, after_timing):
    from grader.judge.perf import timing
    from grader.judge.perf import verdicts

    what = "flash_decode.splits_speedup"
    copy = gpu.ceiling("copy_gbs")
    sub = student()
    B, Hq, Hkv, D = SPEEDUP_SHAPE
    L = speedup_length(copy)
    case = f"B={B}, Hq={Hq}, Hkv={Hkv}, L={L}, D={D}, float16"
    markers, tensors = _decode_inputs(rng, B, Hq, Hkv, L, D)
    times = {}
    splits = (("num_splits=None", {}), ("num_splits=1", {"num_splits": 1}))
    measured = {}
    for label, kwargs in splits:
        call = f"flash_decode(q, k_cache, v_cache, seq_lens, {label}) at {case}"
        reqs = _decode_requests(sub, rng, markers, tensors, call, **kwargs)
        # num_splits=1, timed second: more samples while the speed-up's credit differs across
        # the two readings' ranges (the harness's cost, a small part, is measured afterwards)
        settled = None if not measured else verdicts.settles_over(
            "flash_decode", "split_speedup", measured["num_splits=None"][1], gpu.profile)
        measured[label] = (call, timing.per_call_ms(reqs, settled=settled))
        after_timing(reqs.checked())
    # the gate at this very size with each split count, after the timing (its profiler slows
    # every later launch of its process)
    for label, kwargs in splits:
        call = f"flash_decode(q, k_cache, v_cache, seq_lens, {label}) at {case}"
        after_timing(_checked_once(sub, rng, markers, tensors, call, case, **kwargs))
    harness, note = _harness_ms(workers, rng, what)
    for label, (call, ms) in measured.items():
        if copy == copy and copy > 0:   # the floor judges the time as measured (see bandwidth)
            nbytes = 2 * B * Hkv * L * D * 2
            impossible = timing.below_floor(ms, nbytes / (READ_OVER_COPY * copy) / 1e6, call)
            if impossible:
                raise CheckFailed(impossible)
        if ms - harness <= 0:
            raise CheckFailed(f"{call}: {ms - harness:.4f} ms per call, impossible; no speed-up "
                              f"points")
        times[label] = ms - harness
    split, one = times["num_splits=None"], times["num_splits=1"]
    speedup = one / split
    tally = verdicts.Tally("flash_decode", gpu.profile)
    tally.ratio("split_speedup", measured["num_splits=1"][1], measured["num_splits=None"][1],
                less=harness)
    credit.set(tally.fraction,
               f"{case}: num_splits=None {split:.3f} ms, num_splits=1 {one:.3f} ms: {speedup:.1f}x "
               f"({verdicts.terms('flash_decode', 'split_speedup', gpu.profile, 'x')}); every timed call's output checked (per "
               f"call, {harness:.3f} ms of refill and checksum taken out){note}",
               undecided=tally.undecided())
