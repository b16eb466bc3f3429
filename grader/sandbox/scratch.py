"""The scratch folder of a grading run, with a size limit.

Where the grader may mount (root with CAP_SYS_ADMIN: the os level, and the user level where the
container allows it), the folder that holds a run's workers' scratch folders (their cwd, HOME
and Triton cache), the copy of the submission and what the workers print is a tmpfs of
SCRATCH_LIMIT_BYTES (`workers.Workers`, and each compute-sanitizer run's `tooled.ToolRun`),
mounted before any worker starts and unmounted when the run's folder is removed
(`launcher.remove_tree`). A submission that writes files until the disk is full gets ENOSPC at
the limit: a `batch` run's disk is never filled by one of them. Pages of a tmpfs are charged to
the memory cgroup of the process that wrote them, so what a worker writes there also counts as
its memory. The worker's /tmp and /dev/shm (os level) are tmpfs of their own, sized in
grader/sandbox/confine.py. Elsewhere the folder is a plain folder, and a worker's writes are
limited only per file (RLIMIT_FSIZE). A grader killed from outside leaves its run's tmpfs
mounted, as it left the folder before (`umount -l /tmp/grader-*` frees them).
"""

from __future__ import annotations

import os
from pathlib import Path

from grader.sandbox.confine import mount_tmpfs, mounts_below, unmount

SCRATCH_LIMIT_BYTES = 1 << 30


def limit(folder: Path, size: int = SCRATCH_LIMIT_BYTES) -> bool:
    """Mount a tmpfs of `size` bytes on `folder` (empty: what was in it is hidden) unless one is
    already there; False where this process may not mount (not root, or root without
    CAP_SYS_ADMIN, as in Docker's default container: the `user` level's usual home)."""
    folder = str(folder)
    if os.path.ismount(folder):
        return True
    if os.geteuid() != 0:
        return False
    try:
        mount_tmpfs(folder, size)
    except PermissionError:
        return False
    return True


def release(folder: Path) -> None:
    """Unmount the tmpfs on `folder` and any mount below it (lazily: a file still open elsewhere
    keeps its pages until it is closed). Their files are gone with them."""
    folder = str(folder)
    points = [*mounts_below(folder), *([folder] if os.path.ismount(folder) else [])]
    for point in sorted(points, key=len, reverse=True):
        unmount(point)
