"""No student alive: before the grader times a baseline or a ceiling, every worker of the run is
stopped and NVML's process list says no other process holds the GPU.

    note = quiet_gpu(workers, "flash_triton.speed_vs_sdpa")   # then time the PyTorch baseline

A process the submission left behind, or anything else on the GPU, would slow the baseline and
lift the student's ratio: the check fails instead (it never turns into credit or "not run").
"""

from __future__ import annotations

import os
import time



def stop_students(workers) -> None:
    """Stop every worker of this grading run (the next call starts a fresh one), so nothing of
    the student's runs or has work queued while a baseline or a ceiling is measured (all at
    once: grader.sandbox.workers.close_all)."""
    from grader.sandbox.workers import close_all

    close_all(workers.all())


def gpu_processes() -> set[int] | None:
    """PIDs of the processes using this machine's GPUs now (compute or graphics), from NVML
    (pynvml, else nvidia-smi); None when neither can tell. Also the kernel-use gate's question
    (grader.judge.evidence.kernel_use.assert_gpu_alone)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        pids = set()
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            for running in (pynvml.nvmlDeviceGetComputeRunningProcesses,
                            pynvml.nvmlDeviceGetGraphicsRunningProcesses):
                pids |= {int(p.pid) for p in running(handle)}
        return pids
    except Exception:   # noqa: BLE001 - not installed, or no NVML here: ask the command line
        pass
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return {int(x) for x in out.stdout.split() if x.strip().isdigit()}


def quiet_gpu(workers, what: str, processes=gpu_processes) -> str:
    """Stop the student's workers, then make sure no other process uses the GPU.

    Raises CheckFailed when one does (a process the submission left behind, or anything else
    that would make the baseline slower): a check that cannot measure fairly fails, it never
    turns into credit or into "not run". Returns a note for the report."""
    from grader.judge.answers.compare import CheckFailed
    from grader.sandbox import calllog

    with calllog.span("stop_students", what=what):
        stop_students(workers)
    deadline = time.perf_counter() + 5.0
    while True:
        pids = processes()
        if pids is None:
            return "(GPU process list unavailable: NVML could not be asked)"
        # PIDs NVML reports from another PID namespace are not ours to judge (a container's
        # host): only processes this machine's /proc shows, other than this one, count
        others = sorted(p for p in set(pids) if p != os.getpid() and os.path.exists(f"/proc/{p}"))
        if not others:
            return ""
        if time.perf_counter() > deadline:
            raise CheckFailed(f"{what}: other processes use the GPU (PIDs {others}) after the "
                              f"submission's workers were stopped; the PyTorch baseline cannot "
                              f"be timed fairly, so this check counts as failed",
                              hint="a submission must not leave processes running on the GPU")
        time.sleep(0.2)
