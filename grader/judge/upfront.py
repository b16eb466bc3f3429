"""The trusted measurements of a grade's perf checks, made up front when they run side by side.

    survivors = upfront.exercises(candidates)   # those with grader/exercises/<name>/upfront.py
    note = upfront.measure_all(survivors)       # the ceilings, then each one's measure()

grader.run calls it once the untimed gpu checks are over, with no worker of the submission
alive (checked: no other process holds a CUDA context), before the perf processes start: each
exercise's upfront.py makes, through grader.judge.remembered, every measurement its perf checks
read (SDPA baselines, eager baselines, the timing harness's cost), and the perf processes read
them frozen (a miss is the grader's defect). The device's ceilings come first.
"""

from __future__ import annotations

import importlib
import os
import time

from grader.registry import EXERCISES_DIR


class NotQuiet(Exception):
    """Another process holds the GPU: nothing can be measured fairly up front."""


def exercises(candidates) -> list[str]:
    """The candidates whose folder says how to make their perf measurements (upfront.py)."""
    return [e for e in candidates if (EXERCISES_DIR / e / "upfront.py").is_file()]


def measure_all(names, processes=None, wait_s: float = 5.0) -> str:
    """Measure the ceilings and every named exercise's measurements into the table of
    grader.judge.remembered (its file must be set). Raises NotQuiet when another process holds
    the GPU for `wait_s`. Returns a note for the report."""
    import torch

    from grader.judge import ceilings, timing
    from grader.sandbox import calllog

    processes = processes or timing.gpu_processes
    deadline = time.perf_counter() + wait_s
    while True:
        pids = processes()
        others = sorted(p for p in set(pids or []) if p != os.getpid() and os.path.exists(f"/proc/{p}"))
        if not others:
            break
        if time.perf_counter() > deadline:
            raise NotQuiet(f"other processes hold the GPU (PIDs {others})")
        time.sleep(0.2)
    with calllog.span("upfront", exercises=list(names)):
        ceilings.remembered_ceilings(torch)
        for name in names:
            importlib.import_module(f"grader.exercises.{name}.upfront").measure()
            torch.cuda.empty_cache()
    if pids is None:
        return " (GPU process list unavailable: NVML could not be asked)"
    return ""
