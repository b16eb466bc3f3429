"""compute-sanitizer memcheck of a student kernel at a ragged size.

A load past the end of a tensor can give the right answer by luck (the memory there held
zeros). memcheck sees the access itself. The worker runs under compute-sanitizer, started by
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

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from grader import errors

TIMEOUT_S = 600
ERROR_EXIT = 99
LOG_INSIDE = "/sandbox/log"


def sanitizer_path() -> str | None:
    return shutil.which("compute-sanitizer") or next(
        (p for p in ("/usr/local/cuda/bin/compute-sanitizer",) if os.path.exists(p)), None)


def _help(tool: str) -> str:
    try:
        return subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def memcheck(submission, exercise: str, tool: str | list | None = None, mode: str = "cuda") -> str:
    """Run the exercise's kernel under memcheck; return the summary or raise CheckFailed /
    a grader.errors exception. `submission`: a launcher Submission (its sources are used) or a
    folder. `tool`/`mode` let the repo's tests drive the plumbing on a CPU with a stand-in."""
    from grader.judge.compare import CheckFailed
    from grader.sandbox import isolation, launcher

    tool = tool or sanitizer_path()
    base = Path(tempfile.mkdtemp(prefix="sanitize-"))
    try:
        if isinstance(submission, launcher.Submission):
            directory, sources = submission.directory, submission.sources
        else:
            directory = Path(submission)
            sources = launcher.copy_sources(directory, base / "sources")
        level = isolation.choose()
        logdir = base / "log"
        logdir.mkdir(mode=0o700)
        log_path = f"{LOG_INSIDE}/memcheck.log" if level.name == "os" else str(logdir / "memcheck.log")
        # --padding puts unallocated bytes after every allocation: without it a read past the
        # end of k lands in v's allocation, which is valid memory, and memcheck has nothing to report
        padding = ["--padding", "65536"] if isinstance(tool, str) and "--padding" in _help(tool) else []
        cmd = [*([tool] if isinstance(tool, str) else tool), "--tool", "memcheck", *padding, "--print-limit", "5",
               "--error-exitcode", str(ERROR_EXIT), "--log-file", log_path]
        # GRADER_SANITIZER_AS_STUDENT=1: if compute-sanitizer cannot watch a process of another
        # user on some driver, run it as the sandbox user instead (the log is then writable by the
        # student's process, so only the exit status and the checked answer decide)
        as_student = os.environ.get("GRADER_SANITIZER_AS_STUDENT") == "1" and level.name == "os"
        if as_student:
            os.chown(logdir, level.uid, level.gid)
        sub = launcher.Submission(exercise, directory, mode, base / "work", sources=sources,
                                  level=level, tool=cmd, env={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
                                  writable=[(str(logdir), LOG_INSIDE)], tool_as_student=as_student)
        # memcheck stops a kernel at its first bad access, so the student's call then fails with
        # "unspecified launch failure": the tool's verdict (exit status, log) still decides, and
        # the call's own error is reported only where the tool found nothing
        problem = None
        try:
            _check_target(sub, exercise, mode)
        except (errors.StudentProblem, CheckFailed) as e:
            problem = e
        finally:
            code = sub.close(wait_s=5 if isinstance(problem, errors.StudentTimeout) else TIMEOUT_S)
        log = _read(logdir / "memcheck.log")
        if os.environ.get("GRADER_SANITIZER_LOG"):   # for the record of a GPU session
            with open(os.environ["GRADER_SANITIZER_LOG"], "a") as f:
                f.write(f"$ {' '.join(cmd)} (exit {code})\n{log[-4000:]}\n")
        if code == ERROR_EXIT:
            count = re.search(r"ERROR SUMMARY: (\d+) error", log)
            first = "\n".join(line for line in log.splitlines() if line.startswith("=========")
                              and ("Invalid" in line or "at " in line or "by thread" in line))[:1500]
            raise CheckFailed(f"compute-sanitizer found {count.group(1) if count else 'some'} memory "
                              f"error(s) in {exercise} at a ragged size (inputs "
                              f"{TARGETS[exercise][0]}):\n{first}")
        if problem is not None:
            raise problem
        if code != 0:
            raise errors.WorkerCrashed(
                f"{exercise} under compute-sanitizer: the worker {launcher.describe_exit(code)} "
                f"after its checked call; compute-sanitizer's log ends:\n{log[-1200:]}")
        summary = re.search(r"ERROR SUMMARY: 0 errors", log)
        return summary.group(0) if summary else "compute-sanitizer: exit status 0"
    finally:
        launcher.remove_tree(base)


def _read(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - (256 << 10)))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


# the call each exercise is checked with: ragged sizes, so the last block runs past the end
TARGETS = {
    "flash_triton": ("q, k, v of shape (1, 2, 1000, 64) float16, BLOCK_N 64", "flash_fwd"),
    "softmax_triton": ("x of shape (37, 781) float16", "softmax"),
    # the last sequence ends at L_max = 1000, not a multiple of any block: an unmasked K or V
    # load of the last KV head leaves the allocation (--padding makes that an error)
    "flash_decode": ("q (2, 8, 64), k_cache and v_cache (2, 2, 1000, 64) float16, seq_lens "
                     "[333, 1000]", "flash_decode"),
}


def _gated_call(sub, exercise: str, fn: str, *args):
    """The checked call, traced like every gated call (a Triton launch, no computing torch op):
    the sanitizer's points need the answer from the student's own kernel too. The profiler does
    not run under compute-sanitizer, so this gate is the trace's alone."""
    from grader.judge.kernel_use import EXTRA_OPS, KERNELS, assert_kernel_computed

    from grader.judge.compare import CheckFailed

    r = sub.call(fn, *args, timeout=TIMEOUT_S, opts={"sync": sub.mode == "cuda", "trace": True})
    try:
        assert_kernel_computed(r.extras, *KERNELS[exercise][fn],
                               allowed=EXTRA_OPS.get(exercise, frozenset()))
    except CheckFailed as e:
        e.follows = (f"{exercise}.uses_kernel",)
        raise
    return r.value


def _check_target(sub, exercise: str, mode: str) -> None:
    """One call at the ragged size with seeded inputs the worker draws itself; the answer comes
    back through the codec and is checked here against the trusted reference."""
    import numpy as np

    from grader.judge.compare import CheckFailed
    from grader.judge.inputs import seeded, torch_randn

    device = "cuda" if mode == "cuda" else "cpu"
    rng = np.random.default_rng()
    if exercise == "flash_decode":
        return _check_decode(sub, rng, device, mode)
    if exercise == "flash_triton":
        shape, fn = (1, 2, 1000, 64), "flash_fwd"
    else:
        shape, fn = (37, 781), "softmax"
    seeds = [int(x) for x in rng.integers(0, 2**31 - 1, size=3 if exercise == "flash_triton" else 1)]
    markers = [seeded(shape, "float16", device, s) for s in seeds]
    got = _gated_call(sub, exercise, fn, *markers)
    tensors = [torch_randn(shape, "float16", device, s).float() for s in seeds]
    import torch

    if exercise == "flash_triton":
        q, k, v = tensors
        want = torch.softmax((q @ k.transpose(-2, -1)) * shape[-1] ** -0.5, dim=-1) @ v
    else:
        want = torch.softmax(tensors[0], dim=-1)
    want = want.cpu().numpy()
    arr = getattr(got, "array", None)
    if arr is None or tuple(arr.shape) != tuple(want.shape) or not np.allclose(
            np.asarray(arr, dtype=np.float64), want, atol=2e-2, rtol=2e-2):
        raise CheckFailed(f"under compute-sanitizer, {exercise}.{fn}() did not return the right "
                          f"answer at a ragged size ({TARGETS[exercise][0]}), so there is no "
                          f"checked launch to judge")


def _check_decode(sub, rng, device: str, mode: str) -> None:
    """flash_decode's target: GQA (4 query heads per KV head), one ragged and one full sequence."""
    import numpy as np
    import torch

    from grader.judge.compare import CheckFailed
    from grader.judge.inputs import seeded, tensor, torch_randn

    lens = [333, 1000]
    shapes = [(2, 8, 64), (2, 2, 1000, 64), (2, 2, 1000, 64)]
    seeds = [int(x) for x in rng.integers(0, 2**31 - 1, size=3)]
    markers = [seeded(sh, "float16", device, s) for sh, s in zip(shapes, seeds)]
    got = _gated_call(sub, "flash_decode", "flash_decode", *markers,
                      tensor(np.array(lens, np.int32), "int32", device=device, poison=0.0))
    q, k, v = (torch_randn(sh, "float16", device, s).float() for sh, s in zip(shapes, seeds))
    want = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    for b, n in enumerate(lens):
        kk = k[b, :, :n].repeat_interleave(4, dim=0)            # query head h reads KV head h // 4
        vv = v[b, :, :n].repeat_interleave(4, dim=0)
        s = torch.einsum("hd,hnd->hn", q[b], kk) * 64 ** -0.5
        want[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, dim=-1), vv)
    want = want.cpu().numpy()
    arr = getattr(got, "array", None)
    if arr is None or tuple(arr.shape) != tuple(want.shape) or not np.allclose(
            np.asarray(arr, dtype=np.float64), want, atol=2e-2, rtol=2e-2):
        raise CheckFailed(f"under compute-sanitizer, flash_decode.flash_decode() did not return "
                          f"the right answer ({TARGETS['flash_decode'][0]}), so there is no "
                          f"checked launch to judge")
