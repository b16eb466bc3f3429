"""gpu check for exercises/bench_attn.py: the student's sweep on CUDA, where naive attention's
peak memory grows about 4x per doubling of N and SDPA's does not (sweeps.py reads the rows)."""

from __future__ import annotations

import pytest

from grader.exercises.bench_attn.judging import is_number
from grader.exercises.bench_attn.sweeps import check_timed_row
from grader.judge import timing
from grader.judge.compare import CheckFailed
from grader.wire.codec import Trusted


@pytest.mark.check("bench_attn.gpu_sweep")
def test_gpu_sweep(student, gpu, workers):
    from grader.judge import ceilings

    sub = student()
    B, H, D = 1, 8, 64
    Ns = [1024, 2048, 4096]
    import torch

    # free memory is judged with nothing of the student's alive (a worker holding memory would
    # otherwise turn this check into "not run"); anything else on the GPU fails it
    timing.quiet_gpu(workers, "bench_attn.gpu_sweep")
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
