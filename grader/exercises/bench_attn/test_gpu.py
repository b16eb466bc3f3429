"""gpu check for exercises/bench_attn.py: the student's sweep on CUDA, where naive attention's
peak memory grows about 4x per doubling of N and SDPA's does not (judging.py reads the rows).

Every row is also held to the grader's own measurement of the same work, made here after the
call with nothing of the student's alive: its ms to the median GPU time of one call (CUDA
events) of the given naive and of PyTorch's SDPA at that N (TIME_BAND), its peak_gb to the
allocator's peak of the same call (PEAK_BAND). A timer that returns a constant, or a peak made up to grow 4x, earns
nothing."""

from __future__ import annotations

import functools

import pytest

from grader.exercises.bench_attn.judging import check_timed_row, is_number
from grader.judge.perf import events, quiet_gpu
from grader.judge.answers.compare import CheckFailed
from grader.wire.codec import Trusted


# a row's ms against the grader's GPU time of one call: at least 0.4 of it, at most 3x it plus
# 0.1 ms (the student's host clock also spans a launch and a synchronize per call, tens of
# microseconds; the GPU's clock may differ between the two measurements). On an H200 the
# solution's rows read 0.62-1.39 of the grader's time (docs/MEASUREMENTS.md).
TIME_BAND = (0.4, 3.0, 0.1)
# a row's peak_gb against the allocator's peak of the same call here: within 2x, plus 4 MiB
PEAK_BAND = (0.5, 2.0, 4 / 1024)


def _naive(q, k, v):
    """The exercise's given naive attention (S and P through memory)."""
    import torch

    s = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    return torch.softmax(s, dim=-1) @ v


@pytest.mark.check("bench_attn.gpu_sweep")
def test_gpu_sweep(student, gpu, workers):
    from grader.judge.machine import ceilings

    sub = student()
    B, H, D = 1, 8, 64
    Ns = [1024, 2048, 4096]
    import torch

    # free memory is judged with nothing of the student's alive (a worker holding memory would
    # otherwise turn this check into "not run"); anything else on the GPU fails it
    quiet_gpu.quiet_gpu(workers, "bench_attn.gpu_sweep")
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
        check_timed_row(row, B, H, D, what)
        if not is_number(row["peak_gb"]) or row["peak_gb"] <= 0:
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
    _against_own_measurement(peak, {(r["impl"], r["N"]): float(r["ms"]) for r in rows},
                             Ns, B, H, D, what)


def _against_own_measurement(peak: dict, ms: dict, Ns, B: int, H: int, D: int, what: str) -> None:
    """Each row's ms and peak_gb within the bands of what the grader measures for that call."""
    import torch
    import torch.nn.functional as F

    fns = {"naive": _naive, "sdpa": F.scaled_dot_product_attention}
    for N in Ns:
        q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
        for name, fn in fns.items():
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            fn(q, k, v)
            torch.cuda.synchronize()
            own_gb = (torch.cuda.max_memory_allocated() - base) / 1e9
            # no L2 flush: time_proper does not flush either
            own_ms = events.time_cuda(functools.partial(fn, q, k, v), warmup=10, rep=30,
                                     flush_l2=False)
            where = f"{what}: row N={N}, impl={name!r}"
            low, high, plus = PEAK_BAND
            if not low * own_gb <= peak[(name, N)] <= high * own_gb + plus:
                raise CheckFailed(f"{where}: peak_gb = {peak[(name, N)]:.4g}, but the same call "
                                  f"here peaked at {own_gb:.4g} GB above what was allocated",
                                  hint="peak_bytes: synchronize, reset the peak stats, read "
                                       "memory_allocated() as the base, run, synchronize, "
                                       "return max_memory_allocated() - base")
            low, high, plus = TIME_BAND
            if not low * own_ms <= ms[(name, N)] <= high * own_ms + plus:
                raise CheckFailed(f"{where}: ms = {ms[(name, N)]:.4g}, but the grader times one "
                                  f"call of the same work at {own_ms:.4g} ms (expected between "
                                  f"{low * own_ms:.4g} and {high * own_ms + plus:.4g})",
                                  hint="ms comes from time_proper on that impl at that N; is "
                                       "time_proper right (see honest_timing)?")
        del q, k, v
        torch.cuda.empty_cache()
