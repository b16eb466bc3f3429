"""One way to run a worker under a tool that watches it (compute-sanitizer, Nsight Compute).

    with tooled.ToolRun(submission, "memcheck.log") as run:
        sub = run.submission(exercise, mode, [*tool, "--log-file", run.log_path])
        ...                                # calls through sub, answers checked by the caller
        code = run.close(wait_s)           # the tool's exit status
        text = run.log()                   # what the tool wrote

The worker starts through `grader.sandbox.launcher` like every worker (same sandbox). At the os
level the tool runs as root inside the namespaces and the worker below it drops to the sandbox
user; the tool's log goes to a folder only root can write (bound at LOG_INSIDE), so the
student's process can neither write nor forge it. `as_student` (a fallback for a tool that
cannot watch a process of another user) runs the tool after the drop: the log is then the
student's to write, and the caller must decide from what the student cannot forge.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

LOG_INSIDE = "/sandbox/log"
LOG_LIMIT = 256 << 10          # bytes of a log read back by default: its end


def tool_path(name: str) -> str | None:
    """The tool on PATH, or in the CUDA toolkit's usual folder; None when neither has it."""
    found = shutil.which(name)
    if found:
        return found
    path = f"/usr/local/cuda/bin/{name}"
    return path if os.path.exists(path) else None


def help_text(tool: str) -> str:
    """`tool --help`, to ask whether this version knows an option ("" when it cannot run)."""
    try:
        return subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def read_log(path: Path, limit: int = LOG_LIMIT) -> str:
    """The last `limit` bytes of a log ("" when there is none)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


class ToolRun:
    """A scratch folder, the submission's sources, and a root-only log folder for one run of a
    worker under a tool. `submission`: a proxy Submission (its sources are used) or a folder."""

    def __init__(self, submission, log_name: str, as_student: bool = False,
                 prefix: str = "tooled-"):
        from grader.sandbox import isolation, launcher, proxy, scratch

        self.base = Path(tempfile.mkdtemp(prefix=prefix))
        self.level = isolation.choose()
        if self.level.as_student:
            scratch.limit(self.base)   # the worker's files and the tool's log: a size limit
        if isinstance(submission, proxy.Submission):
            self.directory, self.sources = submission.directory, submission.sources
        else:
            self.directory = Path(submission)
            self.sources = launcher.copy_sources(self.directory, self.base / "sources")
        self.logdir = self.base / "log"
        self.logdir.mkdir(mode=0o700)
        self.log_name = log_name
        self.log_path = (f"{LOG_INSIDE}/{log_name}" if self.level.name == "os"
                         else str(self.logdir / log_name))
        self.as_student = as_student and self.level.name == "os"
        if self.as_student:
            os.chown(self.logdir, self.level.uid, self.level.gid)
        self.sub = None

    def submission(self, exercise: str, mode: str, cmd: list, env: dict | None = None):
        """The worker of `exercise` in `mode`, started (at its first call) under `cmd`."""
        from grader.sandbox import proxy

        self.sub = proxy.Submission(exercise, self.directory, mode, self.base / "work",
                                    sources=self.sources, level=self.level, tool=cmd, env=env,
                                    writable=[(str(self.logdir), LOG_INSIDE)],
                                    tool_as_student=self.as_student)
        return self.sub

    def close(self, wait_s: float) -> int | None:
        """Stop the worker (the tool exits after it); the tool's exit status."""
        sub, self.sub = self.sub, None
        return sub.close(wait_s=wait_s) if sub is not None else None

    def log(self, limit: int = LOG_LIMIT) -> str:
        return read_log(self.logdir / self.log_name, limit)

    def __enter__(self) -> ToolRun:
        return self

    def __exit__(self, *exc) -> None:
        from grader.sandbox import launcher

        try:
            self.close(wait_s=5)
        finally:
            launcher.remove_tree(self.base)
