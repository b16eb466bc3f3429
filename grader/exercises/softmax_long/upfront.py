"""softmax_long's trusted measurements for its perf check: torch.softmax's time and the timing
harness's cost at each width (grader.judge.timing.baseline_ms). A grade whose perf checks run side
by side makes them up front, with nothing of the student's alive (grader.run)."""

from __future__ import annotations

# (rows, cols, bandwidth band of rows.py): 128 MiB of float16 each (read 128, write 128), far
# past any L2; short rows several per program, a one-tile width, and long rows read twice
WIDTHS = ((262144, 256, "bandwidth"), (16384, 4096, "bandwidth"), (1024, 65536, "bandwidth_long"))


def torch_softmax(x):
    import torch

    return torch.softmax(x, dim=-1)


def measure() -> None:
    import torch

    from grader.judge import timing

    for rows, cols, _ in WIDTHS:
        timing.baseline_ms(torch_softmax, torch.randn((rows, cols), dtype=torch.float16, device="cuda"))
