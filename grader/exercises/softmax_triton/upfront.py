"""softmax_triton's trusted measurements for its perf check: softmax_eager's time and the timing
harness's cost at the bandwidth shape (grader.judge.timing.baseline_ms). A grade whose perf checks
run side by side makes them up front, with nothing of the student's alive (grader.run)."""

from __future__ import annotations

BANDWIDTH_SHAPE = (32768, 4096)   # 256 MiB of fp16: far past any L2


def eager(x):
    """The lesson's softmax_eager, run here as the baseline (the student's copy could be slowed)."""
    m = x.max(dim=1, keepdim=True).values
    e = (x - m).exp()
    return e / e.sum(dim=1, keepdim=True)


def measure() -> None:
    import torch

    from grader.judge import timing

    timing.baseline_ms(eager, torch.randn(BANDWIDTH_SHAPE, dtype=torch.float16, device="cuda"))
