"""The GPU shared by the perf layer's grading processes, and had alone for every timing.

When a grade runs the perf checks of several exercises side by side (grader.run), each of its
perf processes holds the GPU `shared` while a check runs (gated calls, verification, replays:
work that may overlap) and `alone` while it times (timing.per_call_ms): no other process of the
grade has work of the grader's on the GPU then. The SDPA baselines and ceilings are not timed
there at all: the grade measures them up front, with nothing of the student's alive
(grader.judge.remembered). The student's idle workers of other checks stay alive while a check
times; only the same submission's work could slow its own timing.

Two flock(2) files in a folder only the grader can open (mode 0700): `gate`, taken briefly by
whoever wants in and held by a process waiting to be alone, so that a stream of shared holders
cannot starve it, and `gpu`, held LOCK_SH or LOCK_EX. Without a folder (a grade in one
process) both are no-ops.

    turns.join(folder)            # in each perf process, once
    with turns.shared(): ...      # a perf check (grader.plugin)
    with turns.alone(): ...       # a timing, inside it
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from pathlib import Path

_state: dict = {"folder": "", "gate": None, "gpu": None, "mode": None}


@contextlib.contextmanager
def for_run(wanted: bool = True):
    """A new folder for one grade's perf processes (None when not `wanted`), removed after."""
    if not wanted:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="grader-turns-"))
    try:
        yield folder
    finally:
        for name in ("gate", "gpu"):
            with contextlib.suppress(OSError):
                (folder / name).unlink()
        with contextlib.suppress(OSError):
            folder.rmdir()


def join(folder: str | None) -> None:
    """Take turns with the other processes of `folder` from now on ("" or None: no one else)."""
    for name in ("gate", "gpu"):
        if _state[name] is not None:
            os.close(_state[name])
            _state[name] = None
    _state["folder"], _state["mode"] = folder or "", None
    if folder:
        for name in ("gate", "gpu"):
            _state[name] = os.open(os.path.join(folder, name), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def active() -> bool:
    return bool(_state["folder"])


def _enter(mode: str) -> None:
    import time

    from grader.sandbox import calllog

    start = time.perf_counter()
    fcntl.flock(_state["gate"], fcntl.LOCK_EX)
    try:
        fcntl.flock(_state["gpu"], fcntl.LOCK_SH if mode == "shared" else fcntl.LOCK_EX)
    finally:
        fcntl.flock(_state["gate"], fcntl.LOCK_UN)
    _state["mode"] = mode
    calllog.record(f"wait_{mode}", "", "trusted", time.perf_counter() - start)


def _leave() -> None:
    fcntl.flock(_state["gpu"], fcntl.LOCK_UN)
    _state["mode"] = None


@contextlib.contextmanager
def shared():
    """The GPU with the other perf processes (nested in one already held: nothing more)."""
    if not active() or _state["mode"] is not None:
        yield
        return
    _enter("shared")
    try:
        yield
    finally:
        _leave()


@contextlib.contextmanager
def alone():
    """The GPU to this process alone: waits until every other process left its shared turn.
    Inside `shared`, gives that up first and takes it again after."""
    if not active() or _state["mode"] == "alone":
        yield
        return
    before = _state["mode"]
    if before is not None:
        _leave()
    _enter("alone")
    try:
        yield
    finally:
        _leave()
        if before is not None:
            _enter(before)
