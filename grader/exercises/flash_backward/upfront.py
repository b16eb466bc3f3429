"""flash_backward's trusted measurements for its perf checks: the fastest SDPA backend's forward
and backward at each timed size, causal and not (grader.judge.baselines.fastest_sdpa). A grade
whose perf checks run side by side makes them up front, with nothing of the student's alive
(grader.run)."""

from __future__ import annotations


def measure() -> None:
    import torch

    from grader.exercises.flash_backward.measure import B_PERF, D_PERF, H_PERF, PERF_N
    from grader.judge import baselines

    for N in PERF_N:
        q, k, v, do = (torch.randn((B_PERF, H_PERF, N, D_PERF), dtype=torch.float16,
                                   device="cuda") for _ in range(4))
        for causal in (False, True):
            baselines.fastest_sdpa(q, k, v, causal=causal, do=do)
        del q, k, v, do
