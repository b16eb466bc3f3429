"""compute-sanitizer memcheck of a student kernel at a ragged size.

A load past the end of a tensor can give the right answer by luck (the memory there held
zeros). memcheck sees the access itself. The trusted side (`memcheck`) runs this module as a
separate process under compute-sanitizer, with PyTorch's caching allocator off so every tensor
is its own allocation and a read past its end falls outside any allocation. The process that
runs student code is that child, never the grader.

    python -m grader.sandbox.sanitize <submission_dir> <exercise>      (run by memcheck, not by hand)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from grader import errors

NOT_IMPLEMENTED_EXIT = 3
STUDENT_ERROR_EXIT = 4
TIMEOUT_S = 600


def sanitizer_path() -> str | None:
    return shutil.which("compute-sanitizer") or next(
        (p for p in ("/usr/local/cuda/bin/compute-sanitizer",) if os.path.exists(p)), None)


def _help(tool: str) -> str:
    try:
        return subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def memcheck(submission_dir: Path, exercise: str) -> str:
    """Run the exercise's kernel under memcheck; return the summary or raise CheckFailed /
    a grader.errors exception."""
    from grader.judge.compare import CheckFailed

    tool = sanitizer_path()
    # --padding puts unallocated bytes after every allocation: without it a read past the end of
    # k lands in v's allocation, which is valid memory, and memcheck has nothing to report
    padding = ["--padding", "65536"] if "--padding" in _help(tool) else []
    cmd = [tool, "--tool", "memcheck", *padding, "--print-limit", "5", "--error-exitcode", "99",
           sys.executable, "-m", "grader.sandbox.sanitize", str(Path(submission_dir).resolve()), exercise]
    env = {**os.environ, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    env.pop("TRITON_INTERPRET", None)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env,
                              cwd=Path(__file__).resolve().parents[2])
    except subprocess.TimeoutExpired:
        raise errors.StudentTimeout(f"{exercise} under compute-sanitizer did not finish within "
                                    f"{TIMEOUT_S} s") from None
    out = proc.stdout + proc.stderr
    if os.environ.get("GRADER_SANITIZER_LOG"):   # for the record of a GPU session
        with open(os.environ["GRADER_SANITIZER_LOG"], "a") as log:
            log.write(f"$ {' '.join(cmd)}\n{out[-4000:]}\n")
    if proc.returncode == NOT_IMPLEMENTED_EXIT:
        raise errors.NotImplementedByStudent(f"{exercise} is not implemented yet")
    if proc.returncode == STUDENT_ERROR_EXIT:
        raise errors.StudentRaised(f"{exercise} raised under compute-sanitizer:\n{out[-1200:]}")
    summary = re.search(r"ERROR SUMMARY: (\d+) error", out)
    if summary is None:
        raise errors.WorkerCrashed(f"{exercise} under compute-sanitizer ended with status "
                                   f"{proc.returncode} and no error summary:\n{out[-1200:]}")
    count = int(summary.group(1))
    if count:
        first = "\n".join(line for line in out.splitlines() if line.startswith("=========")
                          and ("Invalid" in line or "at " in line or "by thread" in line))[:1500]
        raise CheckFailed(f"compute-sanitizer found {count} memory error(s) in {exercise} at a "
                          f"ragged size (inputs {TARGETS[exercise][0]}):\n{first}")
    return summary.group(0)


# the call each exercise is checked with: ragged sizes, so the last block runs past the end
TARGETS = {
    "flash_triton": ("q, k, v of shape (1, 2, 1000, 64) float16, BLOCK_N 64", "flash_fwd"),
    "softmax_triton": ("x of shape (37, 781) float16", "softmax"),
}


def _target(module, exercise: str) -> None:
    import torch

    gen = torch.Generator(device="cuda").manual_seed(0)
    if exercise == "flash_triton":
        q, k, v = (torch.randn(1, 2, 1000, 64, generator=gen, device="cuda", dtype=torch.float16)
                   for _ in range(3))
        module.flash_fwd(q, k, v)
    else:
        x = torch.randn(37, 781, generator=gen, device="cuda", dtype=torch.float16)
        module.softmax(x)
    torch.cuda.synchronize()


def main(argv: list[str]) -> int:
    import importlib.util

    submission, exercise = Path(argv[0]), argv[1]
    sys.path.insert(0, str(submission))
    try:
        spec = importlib.util.spec_from_file_location(exercise, submission / f"{exercise}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[exercise] = module
        spec.loader.exec_module(module)
        _target(module, exercise)
    except NotImplementedError:
        return NOT_IMPLEMENTED_EXIT
    except BaseException as e:  # noqa: BLE001
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return STUDENT_ERROR_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
