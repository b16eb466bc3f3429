"""Peak memory of a worker, measured from outside it: the kernel's count, not the student's.

tracemalloc runs inside the worker and sees only what Python's and NumPy's allocators report; an
anonymous mmap, a C extension, memory allocated at import or a child process escapes it, and the
student can stop it. This module reads the worker's memory in the trusted process:

    with fresh_worker(sub) as fresh:           # a new worker: nothing left from earlier checks
        base = fresh_baseline(fresh)           # the same count for a worker whose module is empty
        with peak_rss(fresh) as peak:          # the peak is reset here, read at the end
            r = fresh.call("tiled_attention", ...)
    peak["bytes"] - base                       # what the student's module and call hold at the peak

Two counts, the first that this machine has (`Meter`):
  cgroup   the worker's own memory cgroup (grader/sandbox/cgroups.py, made by the launcher at
           the os level): every process of its tree, anonymous memory, tmpfs and page cache
           alike; reset and read by the grader only (v1 memory.max_usage_in_bytes, v2
           memory.peak). The worker cannot reach these files: /sys is read-only in the
           sandbox and they belong to root.
  VmHWM    the worker process's peak resident set (/proc/<pid>/status), reset through
           /proc/<pid>/clear_refs: the worker process alone, no children (the seccomp filter
           denies it any). A process can reset its own VmHWM, so its VmRSS is also sampled every
           2 ms by the grader during the block (`_Sampler`): a reset after the peak does not
           undo what was read.

Memory is absolute: the peak is judged against a baseline worker's count (same exercise name and
mode, the same libraries loaded, an empty module), so whatever the student's module allocated
at import, or kept from an earlier call, counts against the call. The memory checks run their
call in a worker of their own, fresh for it: memory the C allocator kept from earlier checks'
calls (glibc does not hand a freed heap back at once; 16 MB stayed after naive_attention at
N = 1000) would otherwise count against the student. The gates of other calls (the tiled checks'
`tiled_call`) read the same count in the exercise's shared worker, which trims its heap after
every traced call (grader/worker/probes.py), with a margin for what stays.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from grader.sandbox import cgroups

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


# what a memory check says where this machine has no outside count (available() is False: no
# /proc, not Linux): it fails closed, since tracemalloc, beside the student's code, is no evidence
UNMEASURED = ("the worker's memory could not be measured here: this machine has no "
              "/proc/<pid>/clear_refs (Linux has), so the grader cannot count it from outside "
              "the worker, and a check of memory fails closed, no points. Grade on Linux (WSL "
              "included) or on Gradescope for these points")
UNMEASURED_HINT = "Nothing to fix in your code for this message: the memory checks need Linux."


def traced(extras) -> str:
    """tracemalloc's peak of a call (grader/worker/probes.py), as words for a message that
    explains a failure: it runs in the student's process, so it is never the evidence of one."""
    extras = extras if isinstance(extras, dict) else {}
    peak = extras.get("peak_bytes")
    if extras.get("tracemalloc_tampered"):
        return f"tracemalloc, in the worker, was switched off ({extras['tracemalloc_tampered']})"
    return (f"tracemalloc, in the worker, saw {peak} bytes" if type(peak) is int
            else "tracemalloc, in the worker, sent nothing back")


class Unmeasurable(Exception):
    """The worker's peak could not be read or reset, where a fresh worker's could: something in
    the submission changed its process (PR_SET_DUMPABLE, for one). Checks count it as failed."""


class Meter:
    """How one worker's memory is counted: its memory cgroup where it has one, else the worker
    process's VmRSS and VmHWM. `how` names it for messages and for the baseline's cache."""

    def __init__(self, pid: int):
        self.pid = pid
        self.cgroup = cgroups.MemoryCgroup.of(pid)
        if self.cgroup is None:
            self.how = "VmHWM and VmRSS sampled every 2 ms, the worker process alone"
        else:
            peak = "memory.peak" if self.cgroup.v2 else "memory.max_usage_in_bytes"
            self.how = f"its cgroup's {peak}, every process of its tree"

    def current(self) -> int:
        return self.cgroup.usage() if self.cgroup is not None else status_bytes(self.pid, "VmRSS")

    def reset(self) -> None:
        if self.cgroup is not None:
            self.cgroup.reset_peak()
        else:
            reset_peak(self.pid)

    def peak(self) -> int:
        return self.cgroup.peak() if self.cgroup is not None else status_bytes(self.pid, "VmHWM")


def meter(sub) -> Meter:
    """The Meter of `sub`'s current worker (read afresh: a process id is only unique while its
    process lives)."""
    return Meter(sub.worker_pid)


@contextlib.contextmanager
def peak_rss(sub):
    """The peak memory of `sub`'s worker over the block: result["bytes"], with "before" (the
    count when it started), "how", and "since_start" (True where the peak could not be reset,
    cgroup v2 before Linux 6.12: then it is the peak since the worker started, which a fresh
    worker's measurement can still use). Where it is, the worker process's own rise is counted
    too, as at the process level (its VmHWM reset, its VmRSS sampled): result["process_bytes"]
    and "process_before", so a gate on one call of a long-lived worker still has evidence of
    what that call held. Raises Unmeasurable where it cannot be read or reset."""
    try:
        m = meter(sub)
        before = m.current()
        m.reset()
        since_start = m.cgroup is not None and not m.cgroup.resettable
        result = {"pid": m.pid, "before": before, "how": m.how, "since_start": since_start}
        if since_start:
            result["process_before"] = status_bytes(m.pid, "VmRSS")
            reset_peak(m.pid)
    except (OSError, ValueError, RuntimeError) as e:
        raise Unmeasurable(f"could not reset the worker's peak memory ({e})") from None
    sampler = _Sampler(m.pid) if m.cgroup is None or since_start else None
    try:
        yield result
        result["bytes"] = max(m.peak(), sampler.stop() if sampler and not since_start else 0)
        if since_start:
            result["process_bytes"] = max(status_bytes(m.pid, "VmHWM"), sampler.stop())
    except (OSError, ValueError, RuntimeError) as e:
        raise Unmeasurable(f"could not read the worker's peak memory ({e})") from None
    finally:
        if sampler is not None:
            sampler.stop()
        if m.cgroup is not None:
            m.cgroup.close()


class _Sampler:
    """VmRSS of a worker read every SAMPLE_S by a thread of the grader, where only VmHWM counts
    it: a process can reset its own VmHWM (/proc/self/clear_refs) after its peak, but not what
    was read here meanwhile. An N x N matrix that lives a few milliseconds is seen."""

    def __init__(self, pid: int):
        import threading

        self.pid, self.most, self._done = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(SAMPLE_S):
            try:
                self.most = max(self.most, status_bytes(self.pid, "VmRSS"))
            except (OSError, RuntimeError, ValueError):
                return

    def stop(self) -> int:
        self._done.set()
        self._thread.join()
        return self.most


SAMPLE_S = 0.002


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


def fresh_baseline(sub, module: str = "", warm: tuple = ()) -> int | None:
    """The memory count of a fresh worker like `sub`'s (same exercise name and mode, counted the
    same way) whose module is `module` (empty by default: no submission), after it ran each
    call of `warm` ((function name, args) pairs): the memory no submission can avoid. A warm-up
    that does the exercise's kind of work (matrix products of its largest sizes) touches what
    the libraries keep (BLAS's workspace: about 5 MB after a 1000 x 1000 product), which a
    submission's worker holds as well. Measured once per grading run, mode, count and module.
    None where this machine does not let the grader reset a worker's peak (then only
    tracemalloc is evidence)."""
    from grader.sandbox.proxy import Submission

    if not available():
        return None
    try:
        how = meter(sub).how
    except OSError:
        return None
    key = f"{sub.mode}/{how}/{hash((module, warm))}"
    if key not in _BASELINES:
        with tempfile.TemporaryDirectory(prefix="grader-baseline-") as tmp:
            (Path(tmp) / f"{sub.exercise}.py").write_text(module)
            empty = Submission(sub.exercise, Path(tmp), sub.mode, Path(tmp) / "scratch")
            try:
                for fn, args in warm:
                    empty.call(fn, *args)
                m = meter(empty)
                m.reset()   # where the peak cannot be reset, it cannot be measured: None
                _BASELINES[key] = m.current() if m.how == how else None
                if m.cgroup is not None:
                    m.cgroup.close()
            except OSError:
                _BASELINES[key] = None
            finally:
                empty.close()
    return _BASELINES[key]
