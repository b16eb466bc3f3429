"""How much memory this grade may use: the smallest limit of the cgroups the grader runs in (v1
and v2), read once. Not MemTotal: a VM whose memory grows as it is used (the H200 machines
here) starts with a small MemTotal and no real limit, and a container's MemTotal is the host's.

A worker with torch and Triton loaded holds about 240 MB, and a grade can have six of them alive
(one per exercise and mode, kept for the next check). Gradescope's default container has 768 MB:
there the workers of one exercise at a time fit, six do not (the grader was OOM-killed and the
result said "Grading failed"). `Workers` asks `one_exercise_at_a_time()` and, when it says so,
stops the workers of the other exercises before a check of a new one starts. Below
ONE_WORKER_BYTES even one exercise's workers do not fit (the grader holds about 400 MB with torch
loaded: at 768 MB a second worker got it OOM-killed), so `one_worker_at_a_time()` makes every
worker start stop the others (grader.sandbox.proxy): the grader and one worker at a time.
"""

from __future__ import annotations

import functools
from pathlib import Path

# below this, one exercise's workers at a time (six workers need about 2.2 GB with the grader)
LOW_MEMORY_BYTES = 3 << 30
# below this, one worker at a time: the grader (~400 MB) and two workers (~240 MB each) need ~900 MB
ONE_WORKER_BYTES = 1280 << 20
CGROUP = Path("/sys/fs/cgroup")


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None   # "max" (v2, no limit) is not a number


def cgroup_limits(proc_cgroup: str | None = None, root: Path = CGROUP) -> list[int]:
    """Memory limits of this process's cgroup and its parents, v2 (memory.max) and v1
    (memory.limit_in_bytes): what /proc/self/cgroup names."""
    if proc_cgroup is None:
        try:
            proc_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            return []
    limits = []
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            files, base = ("memory.max",), root
        elif "memory" in controllers.split(","):
            files, base = ("memory.limit_in_bytes",), root / "memory"
        else:
            continue
        parts = Path(path.lstrip("/")).parts
        for depth in range(len(parts), -1, -1):   # the cgroup, then each parent up to the root
            folder = base.joinpath(*parts[:depth])
            limits += [v for f in files if (v := _read_int(folder / f)) is not None]
    return limits


@functools.lru_cache(maxsize=1)
def memory_bytes() -> int | None:
    """What this grade may use, in bytes (the option memory_mb, --memory-mb, overrides); None
    if unknown."""
    from grader import options

    if options.current().memory_mb is not None:
        return options.current().memory_mb << 20
    known = [v for v in cgroup_limits() if v]
    return min(known) if known else None


def one_exercise_at_a_time() -> bool:
    limit = memory_bytes()
    return limit is not None and limit < LOW_MEMORY_BYTES


def one_worker_at_a_time() -> bool:
    limit = memory_bytes()
    return limit is not None and limit < ONE_WORKER_BYTES
