"""Triton's compiled kernels, kept for a whole grading run.

A grade starts many CUDA workers for one submission: one per gpu check (grader.parallel grades
them in processes side by side), the compute-sanitizer's, the perf layer's after every baseline
(quiet_gpu.quiet_gpu stops them all), and a replay worker beside each. With a cache of its own,
each of them compiled every kernel again (about 1 s apiece on the H200's CPU). Here one grading
run (`for_run`, opened by grader.run.grade and handed to its parallel processes) keeps two
folders that its CUDA workers use as TRITON_CACHE_DIR:

  student   every worker that imports the submission. What one of them writes there, another
            reads: a planted cubin reaches only this submission's own workers, which could
            plant it in their own cache anyway; what they compute is judged by the replay.
  replay    the replay workers (grader.judge.evidence.provenance), which import only the AST-filtered
            kernels. At the `os` level the folder is bound into their namespaces alone, so no
            worker that runs the student's Python can write a binary that a replay would load
            instead of compiling the kernel's source. At the `user` level nothing but file
            permissions would keep the student's uid out, so each replay worker keeps its own
            cache there, as before.

Under the interpreter nothing is compiled: interp and cpu workers keep their own folders. The
run's folder is a tmpfs of SCRATCH_LIMIT_BYTES where the grader may mount (scratch.py), and is
removed when the run ends; a `batch` grades each submission with a cache of its own.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

KINDS = ("student", "replay")

_runs: list[Path] = []          # the open runs' folders, innermost last


@contextlib.contextmanager
def for_run(folder: str | None = None, wanted: bool = True):
    """The kernel cache of one grading run: `folder` when a grade that split the run across
    processes hands its own down (grader.parallel), else a new folder, removed at the end;
    none (None) when no GPU layer is `wanted`: nothing on the CPU layers compiles."""
    import shutil

    from grader.sandbox import scratch

    own = not folder
    if own and not wanted:
        yield None
        return
    path = Path(tempfile.mkdtemp(prefix="grader-kernels-")) if own else Path(folder)
    if own:
        scratch.limit(path)
        path.chmod(0o711)   # traversable, not listable: a `user`-level worker reaches its folder by name
    _runs.append(path)
    try:
        yield path
    finally:
        _runs.remove(path)
        if own:
            scratch.release(path)
            shutil.rmtree(path, ignore_errors=True)


def current() -> str:
    """The innermost open run's folder ("" when none: each worker keeps its own cache)."""
    return str(_runs[-1]) if _runs else ""


def folder_for(kind: str, mode: str, level) -> Path | None:
    """The host folder a worker of `mode` at isolation `level` uses as TRITON_CACHE_DIR, or
    None for its own (in its scratch): no run open, a mode that compiles nothing, or a replay
    worker at the `user` level."""
    if kind not in KINDS:
        raise ValueError(f"unknown kernel cache {kind!r}")
    if not _runs or mode != "cuda" or (kind == "replay" and level.name == "user"):
        return None
    path = _runs[-1] / kind
    path.mkdir(mode=0o700, exist_ok=True)
    if level.as_student:
        os.chown(path, level.uid, level.gid)
    return path
