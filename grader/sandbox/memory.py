"""Peak memory of a worker, measured from outside it: the kernel's count, not the student's.

tracemalloc runs inside the worker and sees only what Python's and NumPy's allocators report; an
anonymous mmap, a C extension or memory allocated at import escapes it. This module reads the
worker's resident memory from /proc, in the trusted process:

    with fresh_worker(sub) as fresh:           # a new worker: nothing left from earlier checks
        base = fresh_baseline(fresh)           # VmRSS of a fresh worker that imported an empty module
        with peak_rss(fresh) as peak:          # clear_refs resets VmHWM to the current RSS
            r = fresh.call("tiled_attention", ...)
    peak["bytes"] - base                       # what the student's module and call hold at the peak

Memory is absolute: the peak is judged against a fresh process's baseline, so whatever the
student's module allocated at import counts as well. The call runs in a worker of its own, fresh
for it: memory the C allocator kept from earlier checks' calls (glibc does not hand a freed heap
back at once; 16 MB stayed after naive_attention at N = 1000) would otherwise count against
the student.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

_BASELINES: dict[str, int | None] = {}


def status_bytes(pid: int, field: str) -> int:
    """A `kB` line of /proc/<pid>/status (VmRSS, VmHWM) in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/{pid}/status has no {field}")


def reset_peak(pid: int) -> None:
    """Reset the peak resident set (VmHWM) to the current one (Linux >= 4.0)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def available() -> bool:
    return Path("/proc/self/clear_refs").exists()


class Unmeasurable(Exception):
    """The worker's peak could not be read or reset, where a fresh worker's could: something in
    the submission changed its process (PR_SET_DUMPABLE, for one). Checks count it as failed."""


@contextlib.contextmanager
def peak_rss(sub):
    """VmHWM of `sub`'s worker over the block (the peak resident bytes): result["bytes"]."""
    pid = sub.worker_pid
    try:
        reset_peak(pid)
        result = {"pid": pid, "before": status_bytes(pid, "VmRSS")}
    except OSError as e:
        raise Unmeasurable(f"could not reset the worker's peak memory ({e})") from None
    yield result
    try:
        result["bytes"] = status_bytes(pid, "VmHWM")
    except OSError as e:
        raise Unmeasurable(f"could not read the worker's peak memory ({e})") from None


@contextlib.contextmanager
def fresh_worker(sub):
    """A new worker for `sub`'s exercise, made like `sub`, for one measurement; closed after."""
    from grader.sandbox.proxy import Submission

    fresh = Submission(sub.exercise, sub.directory, sub.mode,
                       sub.scratch.parent / f"{sub.scratch.name}-memory", sources=sub.sources)
    try:
        yield fresh
    finally:
        fresh.close()


def fresh_baseline(sub) -> int | None:
    """VmRSS of a fresh worker like `sub`'s (same exercise name and mode) whose module is empty:
    the memory no submission can avoid. Measured once per grading run and mode. None where this
    machine does not let the grader reset a worker's peak (then only tracemalloc is evidence)."""
    from grader.sandbox.proxy import Submission

    if not available():
        return None
    if sub.mode not in _BASELINES:
        with tempfile.TemporaryDirectory(prefix="grader-baseline-") as tmp:
            (Path(tmp) / f"{sub.exercise}.py").write_text("")
            empty = Submission(sub.exercise, Path(tmp), sub.mode, Path(tmp) / "scratch")
            try:
                pid = empty.worker_pid
                reset_peak(pid)
                _BASELINES[sub.mode] = status_bytes(pid, "VmRSS")
            except OSError:
                _BASELINES[sub.mode] = None
            finally:
                empty.close()
    return _BASELINES[sub.mode]
