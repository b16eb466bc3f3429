"""compute-sanitizer memcheck of a student kernel at a ragged size.

A load past the end of a tensor can give the right answer by luck (the memory there held
zeros). memcheck sees the access itself. The worker runs under compute-sanitizer through
grader.sandbox.tooled, the one way to run a worker under a tool: started by
`grader.sandbox.launcher` like every worker (same sandbox: at the os level compute-sanitizer
itself runs as root inside the namespaces and the worker below it drops to the sandbox user),
with PyTorch's caching allocator off so every tensor is its own allocation and a read past its
end falls outside any allocation.

The verdict comes from the tools, never from what the process printed:
  - the call must return, through the codec, an answer the trusted side checks against its own
    reference: a module that exits at import, or skips the launch, earns nothing;
  - compute-sanitizer's exit status (`--error-exitcode`), after the worker exited cleanly;
  - its `--log-file`, in a folder only root can write (at the os level), for the message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from grader import errors, options
from grader.registry import exercise_module
from grader.sandbox import tooled

TIMEOUT_S = 600
ERROR_EXIT = 99
LOG_INSIDE = tooled.LOG_INSIDE


def sanitizer_path() -> str | None:
    return tooled.tool_path("compute-sanitizer")


def memcheck(submission, exercise: str, target: Target | None = None, tool: str | list | None = None,
             mode: str = "cuda") -> str:
    """Run the exercise's kernel under memcheck; return the summary or raise CheckFailed /
    a grader.errors exception. `submission`: a proxy Submission (its sources are used) or a
    folder; `target`: the call to check (default: the exercise folder's kernel.py, `TARGET`).
    `tool`/`mode` let the repo's tests drive the plumbing on a CPU with a stand-in."""
    from grader.judge.answers.compare import CheckFailed
    from grader.sandbox import proxy

    tool = tool or sanitizer_path()
    target = target or target_of(exercise)
    # --sanitizer-as-student: if compute-sanitizer cannot watch a process of another user on
    # some driver, run it as the sandbox user instead (the log is then writable by the
    # student's process, so only the exit status and the checked answer decide)
    as_student = options.current().sanitizer_as_student
    with tooled.ToolRun(submission, "memcheck.log", as_student, prefix="sanitize-") as run:
        # --padding puts unallocated bytes after every allocation: without it a read past the
        # end of k lands in v's allocation, which is valid memory, and memcheck has nothing to report
        padding = (["--padding", "65536"] if isinstance(tool, str)
                   and "--padding" in tooled.help_text(tool) else [])
        cmd = [*([tool] if isinstance(tool, str) else tool), "--tool", "memcheck", *padding, "--print-limit", "5",
               "--error-exitcode", str(ERROR_EXIT), "--log-file", run.log_path]
        sub = run.submission(exercise, mode, cmd, env={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
        # memcheck stops a kernel at its first bad access, so the student's call then fails with
        # "unspecified launch failure": the tool's verdict (exit status, log) still decides, and
        # the call's own error is reported only where the tool found nothing
        problem = None
        try:
            target.run(sub, "cuda" if mode == "cuda" else "cpu")
        except (errors.StudentProblem, CheckFailed) as e:
            problem = e
        finally:
            code = run.close(wait_s=5 if isinstance(problem, errors.StudentTimeout) else TIMEOUT_S)
        log = run.log()
    if options.current().sanitizer_log:   # for the record of a GPU session (--sanitizer-log)
        with open(options.current().sanitizer_log, "a") as f:
            f.write(f"$ {' '.join(cmd)} (exit {code})\n{log[-4000:]}\n")
    if code == ERROR_EXIT:
        count = re.search(r"ERROR SUMMARY: (\d+) error", log)
        first = "\n".join(line for line in log.splitlines() if line.startswith("=========")
                          and ("Invalid" in line or "at " in line or "by thread" in line))[:1500]
        raise CheckFailed(f"compute-sanitizer found {count.group(1) if count else 'some'} memory "
                          f"error(s) in {exercise} at a ragged size (inputs "
                          f"{target.inputs}):\n{first}")
    if problem is not None:
        raise problem
    if code != 0:
        raise errors.WorkerCrashed(
            f"{exercise} under compute-sanitizer: the worker {proxy.describe_exit(code)} "
            f"after its checked call; compute-sanitizer's log ends:\n{log[-1200:]}")
    summary = re.search(r"ERROR SUMMARY: 0 errors", log)
    return summary.group(0) if summary else "compute-sanitizer: exit status 0"


@dataclass(frozen=True)
class Target:
    """The call an exercise is checked with under memcheck, defined next to its checks (the
    exercise folder's kernel.py, `TARGET`): ragged sizes, so the last block runs past the end.

    inputs: what the call gets, for messages ("x of shape (37, 781) float16");
    run(sub, device): makes the call(s) through `gated_call`, with seeded inputs the worker draws
    itself, and checks the answer here against a trusted reference; raises CheckFailed when it
    is wrong (no checked launch, nothing to judge)."""

    inputs: str
    run: Callable


def target_of(exercise: str) -> Target:
    """The exercise's target: `TARGET` of its folder's kernel.py (grader/exercises/<name>/)."""
    return exercise_module(exercise, "kernel").TARGET


def gated_call(sub, exercise: str, fn: str, *args, **kwargs):
    """The checked call, through the one kernel-use gate (a Triton launch, no computing torch
    op, and its program replayed from the kernels alone: grader.judge.evidence.provenance): the
    sanitizer's points need the answer from the student's own kernel too. The profiler does
    not run under compute-sanitizer; the replay runs in a worker of its own, without the tool."""
    from grader.judge.evidence import kernel_use, provenance

    opts = {"sync": sub.mode == "cuda", "trace": True, "program": True}
    r = sub.call(fn, *args, timeout=TIMEOUT_S, opts=opts, **kwargs)
    with provenance.replayers(sub) as (replayer, compiler):
        kernel_use.gate(r.extras, exercise, fn, replayed=provenance.Call(
            replayer, sub.sources, [*args, *kwargs.values()], r.value, opts, compiler))
    return r.value


def wrong_answer(exercise: str, fn: str, target: Target):
    """The CheckFailed for a target call whose answer is wrong."""
    from grader.judge.answers.compare import CheckFailed

    return CheckFailed(f"under compute-sanitizer, {exercise}.{fn}() did not return the right "
                       f"answer at a ragged size ({target.inputs}), so there is no checked "
                       f"launch to judge")


def close_enough(got, want, tol: float = 2e-2) -> bool:
    """A value the worker returned (TensorValue) against a reference tensor or array, loosely:
    the target proves the launch computed the answer; the value checks are elsewhere."""
    import numpy as np

    arr = getattr(got, "array", None)
    want = want.detach().cpu().numpy() if hasattr(want, "detach") else np.asarray(want)
    return arr is not None and tuple(arr.shape) == tuple(want.shape) and bool(np.allclose(
        np.asarray(arr, dtype=np.float64), want, atol=tol, rtol=tol))
