"""flash_backward's perf checks: flash_fwd and flash_bwd against the fastest SDPA backend, causal
against non-causal time, and the memory beyond the outputs. All four read one measurement per
grading run and submission (`measure`), made by whichever of them runs first; a pass whose calls
failed there fails here, and one whose timed outputs are wrong fails here when they are
verified, after the timing.

B = 1, H = 32, D = 128, float16, N = 8K, causal and not:
  1. flash_fwd (q refilled before every call) and flash_bwd (dO refilled) as timed requests in
     one worker; every request's outputs are verified by checksums and at random in full
     after the timing (`after_timing`: Perf.verified). Every timed call is recorded, and one per pass
     and size, drawn after the calls, is replayed from the student's kernels alone: its
     checksum must be the call's to the last bit (ProvingSubmission.records_timed; the kernel-use gate on
     that call), so no profiled call comes first, and the replay worker counts the memory its
     steps held (memory_linear's evidence). The causal time, which causal_skips_blocks judges against the non-causal
     one, takes more samples while that credit is open; still open after them, the pair is
     timed once more at the end and each keeps its faster reading (a disturbance that lasts
     through a whole reading rarely lasts through the other passes' timing as well);
  2. then, the worker stopped, the fastest SDPA backend's forward and backward
     (torch.autograd.grad on its graph), timed here with nothing of the student's alive (not
     at all when both passes failed in 1: a stub costs no baseline).
N = 4K is not timed: recording a call costs about 0.7 ms of CPU, which a causal forward of
0.36 ms (cuDNN's) cannot hide; it read 3.05x SDPA on the H200 against 1.22x at 8K.
A pass (fwd or bwd) whose call fails in 1 is not timed further: its failure is kept, and
every check of that pass raises it (Perf.failure); a pass whose outputs are wrong fails every
check of it when they are verified (Perf.verified).
"""

from __future__ import annotations

import weakref

import pytest

from grader import errors
from grader.exercises.flash_backward.judging import LSE_TOL, unpack
from grader.exercises.flash_backward.reference import given_o_lse
from grader.judge.answers.compare import CheckFailed, assert_close
from grader.judge.perf import baselines
from grader.judge.perf.baselines import attention_flops

# ------------------------------------------------------------------------------ the measurement

PERF_N = (8192,)
FUNCTIONS = {"fwd": "flash_fwd", "bwd": "flash_bwd"}   # each pass's function, as reports name it
B_PERF, H_PERF, D_PERF = 1, 32, 128
GRAD_SLACK = 8.0   # checksum tolerance of the gradients (timed_requests.Requests)


class Perf:
    """What the perf checks of one grading run measured: times, baselines, the timed requests
    (whose verification replays one call each, counting its memory: `peak`), and the failure of
    each pass (a CheckFailed that every check of that pass re-raises)."""

    def __init__(self):
        self.ms, self.base, self.requests, self.failed = {}, {}, {}, {}
        self.note = ""
        self.again: list[str] = []     # passes whose causal pair was timed twice (_time)
        self.checks: dict[str, list] = {"fwd": [], "bwd": []}   # each pass's verifications

    def failure(self, passes) -> None:
        for p in passes:
            if p in self.failed:
                raise self.failed[p]

    def peak(self, key) -> int:
        """The most memory a replayed call of (pass, N, causal) held beyond its inputs, counted
        in the replay worker, once the pass is verified (`verified`)."""
        return max(r.memory_bytes() for r in self.requests[key])

    def verified(self, passes):
        """The verification of these passes' timed outputs, for a check's `after_timing`: each pass's
        runs once per grading run; a wrong output fails every check of its pass."""
        def verify():
            for p in passes:
                while self.checks[p]:
                    work = self.checks[p].pop(0)
                    try:
                        work()
                    except (CheckFailed, errors.StudentProblem) as e:
                        self.failed[p] = e
                        self.checks[p].clear()
            self.failure(passes)
        return verify


# the run's GpuContext (the session's `gpu` fixture) -> {submission directory: Perf}: one
# measurement per grading run; a later run in this process (a batch) measures afresh
_RUNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def measure(student, rng, gpu, workers) -> Perf:
    """This run's measurement of the submission: made now if no perf check made it yet."""
    runs = _RUNS.setdefault(gpu, {})
    sub = student()
    key = str(sub.directory)
    if key not in runs:
        runs[key] = _measure_all(sub, rng, gpu, workers)
    return runs[key]


def _measure_all(sub, rng, gpu, workers) -> Perf:
    from grader.judge.answers import gpu as g
    from grader.judge.perf import quiet_gpu

    perf = Perf()
    shape = {N: (B_PERF, H_PERF, N, D_PERF) for N in PERF_N}
    inputs = {N: g.seeded_inputs(rng, shape[N], "float16", count=4) for N in PERF_N}
    configs = [(N, c) for N in PERF_N for c in (False, True)]
    given = {}   # (N, causal) -> the o and L flash_bwd gets: markers, and the same here
    for N, causal in configs:
        ref_o, ref_lse = g.attention_lse_reference(*inputs[N][1][:3], causal=causal)
        (mo, ml), o = given_o_lse(ref_o, ref_lse, "float16", 0)
        given[(N, causal)] = (mo, ml, o, ref_lse)
        del ref_o
    _time(perf, sub, rng, gpu, inputs, configs, given)
    sub.close()
    if {"fwd", "bwd"} <= set(perf.failed):   # nothing to compare: no baseline is measured
        return perf
    # 2. the baselines, with nothing of the student's alive (quiet_gpu.quiet_gpu)
    perf.note = quiet_gpu.quiet_gpu(workers, "flash_backward perf")
    for N, causal in configs:
        q, k, v, do = inputs[N][1]   # the fastest SDPA backend per pass (judge/baselines)
        perf.base[(N, causal)] = baselines.fastest_sdpa(q, k, v, causal=causal, do=do)
    return perf


def _requests(sub, rng, name, N, causal, markers, inputs, given):
    """The timed requests of one pass at (N, causal), each output verified
    (timed_requests.Requests)."""
    from grader.judge.answers import gpu as g
    from grader.judge.perf import timed_requests

    q, k, v, do = inputs
    if name == "fwd":
        return timed_requests.Requests(
            sub, "flash_fwd", markers[:3], kwargs={"causal": causal}, rng=rng,
            inputs=[q, k, v], dtype="float16", what=f"flash_fwd(q, k, v, causal={causal}) at N={N}",
            reference=lambda i, c=causal: g.attention_lse_reference(*i, causal=c),
            compare=lambda out, exp, case, c=causal, w=f"flash_fwd at N={N}":
                compare_fwd(out, exp, case, w))
    mo, ml, o, lse = given[(N, causal)]
    return timed_requests.Requests(
        sub, "flash_bwd", [*markers[:3], mo, ml, markers[3]],
        kwargs={"causal": causal}, rng=rng, arg=5, inputs=[q, k, v, o, lse, do],
        dtype="float16", slack=GRAD_SLACK,
        what=f"flash_bwd(q, k, v, o, lse, do, causal={causal}) at N={N}",
        reference=lambda i, c=causal: g.attention_grads_reference(
            i[0], i[1], i[2], i[5], c, dtype="float32"),
        compare=lambda out, exp, case, w=f"flash_bwd at N={N}":
            compare_grads(out, exp, case, w))


def _time(perf: Perf, sub, rng, gpu, inputs, configs, given) -> None:
    """1. the student's calls, timed in one worker; then, for a pass whose causal_skips_blocks
    credit its readings still leave open, its pair at the largest N timed once more (`again`)."""
    import torch

    for N, causal in configs:
        for name in ("fwd", "bwd"):
            _time_one(perf, sub, rng, gpu, inputs, given, name, N, causal)
        torch.cuda.empty_cache()
    N = PERF_N[-1]
    for name in ("fwd", "bwd"):
        causal = perf.ms.get((name, N, True))
        if causal is None or _settled(perf, gpu, name, N, True)(causal):
            continue
        perf.again.append(name)
        for c in (False, True):
            _time_one(perf, sub, rng, gpu, inputs, given, name, N, c)
        torch.cuda.empty_cache()


def _time_one(perf: Perf, sub, rng, gpu, inputs, given, name: str, N: int, causal: bool) -> None:
    """One pass at (N, causal): its time and verification, or its failure. Timed a second time,
    it keeps the faster reading (a disturbance only ever adds time)."""
    from grader.judge.perf import timing

    if name in perf.failed:
        return
    markers, tensors = inputs[N]
    key = (name, N, causal)
    try:
        reqs = _requests(sub, rng, name, N, causal, markers, tensors, given)
        ms = timing.per_call_ms(reqs, settled=_settled(perf, gpu, name, N, causal))
        perf.checks[name].append(reqs.checked())
        perf.requests.setdefault(key, []).append(reqs)   # its replays count the memory
        work = attention_flops(B_PERF, H_PERF, N, D_PERF, causal, name == "bwd")
        impossible = timing.below_floor(ms, work / gpu.ceiling("matmul_tflops") / 1e9, reqs.what)
        if impossible:
            raise CheckFailed(impossible)
        perf.ms[key] = min(ms, perf.ms.get(key, ms))
        del reqs
    except (CheckFailed, errors.StudentProblem) as e:
        perf.failed[name] = e


def _settled(perf: Perf, gpu, name: str, N: int, causal: bool):
    """The causal time that causal_skips_blocks judges (at the largest N, over the non-causal
    time timed just before it): more samples while that credit differs across the two readings'
    ranges. The others are judged against SDPA, timed afterwards: three samples each."""
    from grader.judge.perf import verdicts

    full = perf.ms.get((name, N, False))
    if not causal or N != PERF_N[-1] or full is None:
        return None
    return verdicts.settles_over("flash_backward", "causal_half", full, gpu.profile)


def compare_fwd(out, expected, case, what):
    """A timed call's o and lse in full, against the float32 reference."""
    o, lse = unpack(out, what)
    assert_close(o, expected[0], what=f"the o of {what}", dtype="float16", case=case)
    assert_close(lse, expected[1], what=f"the lse of {what}", dtype="float32", case=case,
                 atol=LSE_TOL["float16"] * max(1.0, float(expected[1].abs().max())),
                 rtol=LSE_TOL["float16"])


def compare_grads(out, expected, case, what):
    """A timed call's gradients in full, against float32: within 1% of the largest magnitude
    (the multiple-of-PyTorch rule is gpu_real_sizes' business; here a skipped or stale call shows)."""
    for name, x, r in zip(("dq", "dk", "dv"), unpack(out, what), expected):
        assert_close(x, r, what=f"the {name} of {what}", dtype="float16", case=case,
                     atol=1e-2 * max(1.0, float(r.abs().max())), rtol=1e-2)


# ------------------------------------------------------------------------------ the checks

EXTRA_COPIES = 6                       # memory beyond the outputs: up to 6 tensors the size of q,
EXTRA_MIB = 64                         # plus 64 MiB (allocator rounding, a few numbers per row)


def _speed(perf: Perf, name: str, credit, gpu, after_timing) -> None:
    from grader.judge.perf import verdicts

    perf.failure([name])
    after_timing(perf.verified([name]))
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
def test_forward_speed(student, rng, gpu, credit, workers, after_timing):
    _speed(measure(student, rng, gpu, workers), "fwd", credit, gpu, after_timing)


@pytest.mark.check("flash_backward.backward_speed")
def test_backward_speed(student, rng, gpu, credit, workers, after_timing):
    _speed(measure(student, rng, gpu, workers), "bwd", credit, gpu, after_timing)


@pytest.mark.check("flash_backward.causal_skips_blocks")
def test_causal_skips_blocks(student, rng, gpu, credit, workers, after_timing):
    from grader.judge.perf import verdicts

    perf = measure(student, rng, gpu, workers)
    perf.failure(["fwd", "bwd"])
    after_timing(perf.verified(["fwd", "bwd"]))
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
def test_memory_linear(student, rng, gpu, credit, workers, after_timing):
    from grader.judge.answers import gpu as g

    perf = measure(student, rng, gpu, workers)
    perf.failure(["fwd", "bwd"])
    verify = perf.verified(["fwd", "bwd"])

    def judge():
        verify()   # memory points need right answers from the student's own kernels
        passed, lines = 0, []
        for N in PERF_N:
            q_bytes = B_PERF * H_PERF * N * D_PERF * 2
            outputs = {"fwd": q_bytes + B_PERF * H_PERF * N * 4, "bwd": 3 * q_bytes}
            allowed = EXTRA_COPIES * q_bytes + EXTRA_MIB * g.MIB
            for name, fn in FUNCTIONS.items():
                extra = max(perf.peak((name, N, c)) for c in (False, True)) - outputs[name]
                passed += extra <= allowed
                lines.append(f"{fn} N={N}: {extra / g.MIB:.0f} MiB beyond its outputs")
        credit.set(passed / (2 * len(PERF_N)),
                   "; ".join(lines) + f" (counted on a replay of one timed call each, in a worker "
                   f"that runs only your kernels; allowed: {EXTRA_COPIES} tensors the size of q + "
                   f"{EXTRA_MIB} MiB, {EXTRA_COPIES * 64 + EXTRA_MIB} MiB at N=8192; an N x N score "
                   f"matrix in fp16 adds {2 * B_PERF * H_PERF * 8192 ** 2 * 2 / 2**30:.0f} GiB "
                   f"there)")
    after_timing(judge)
