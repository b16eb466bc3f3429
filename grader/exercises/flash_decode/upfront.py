"""flash_decode's trusted measurements for its perf checks: the timing harness's cost on q
(grader.judge.timing.harness_ms). A grade whose perf checks run side by side makes them up
front, with nothing of the student's alive (grader.run)."""

from __future__ import annotations

PERF_B, PERF_HQ, PERF_D = 8, 32, 128   # the perf checks' batch, query heads, head size


def measure() -> None:
    import torch

    from grader.judge import timing

    timing.harness_ms(torch.empty((PERF_B, PERF_HQ, PERF_D), dtype=torch.float16, device="cuda"))
