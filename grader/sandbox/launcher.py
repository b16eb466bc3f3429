"""The proxy: how trusted checks call student functions without importing them.

    online = workers.get("online_softmax")          # a Submission for that exercise
    y = online.softmax_safe(x)                       # runs in the worker, returns decoded values
    r = online.call("tiled_attention", Q, K, V, opts={"tracemalloc": True})
    r.value, r.stdout, r.extras["peak_bytes"], r.wall_s

Every call has a time limit. A worker that dies (segfault, os._exit, illegal memory access,
out of memory) or runs past its limit is killed and the call raises the matching
`grader.errors` exception with a clear message; the next call starts a fresh worker. An error at
import (SyntaxError, missing file, an exception, sys.exit) is remembered and raised by every call
without starting another worker.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader.sandbox import codec
from grader import errors

# GRADER_TIMEOUT_SCALE stretches (slow machine) or shrinks (the repo's own tests) every limit
_SCALE = float(os.environ.get("GRADER_TIMEOUT_SCALE", "1"))
DEFAULT_TIMEOUT_S = {m: s * _SCALE for m, s in {"cpu": 30.0, "interp": 120.0, "cuda": 180.0}.items()}
LOAD_TIMEOUT_S = 120.0 * max(_SCALE, 1.0)   # importing torch + triton on a cold, busy 2-core machine
MAX_TIMEOUTS = 2                # after this many, further calls fail at once: a hang costs minutes, not hours
OUTPUT_LIMIT = 1500             # characters of student output kept per call
MEMORY_LIMIT_BYTES = 12 << 30   # address space of a CPU worker: runaway allocations fail fast


@dataclass
class CallResult:
    value: object
    stdout: str = ""
    wall_s: float = 0.0       # the trusted side's own clock around the whole round trip
    extras: dict = field(default_factory=dict)


def shorten(text: str, limit: int = OUTPUT_LIMIT) -> str:
    text = text.strip("\n")
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... [{len(text) - limit} characters cut] ...\n{text[-half:]}"


def describe_exit(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"died with {signal.Signals(-code).name}"
        except ValueError:
            return f"died with signal {-code}"
    return f"exited with status {code}"


class Submission:
    """One exercise of one submission, run in one mode ("cpu", "interp" or "cuda")."""

    def __init__(self, exercise: str, directory: Path, mode: str, scratch: Path):
        self.exercise = exercise
        self.directory = Path(directory).resolve()
        self.path = self.directory / f"{exercise}.py"
        self.mode = mode
        self.scratch = Path(scratch)
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.capture_path = str(self.scratch / "output.txt")
        self.timeout_s = DEFAULT_TIMEOUT_S[mode]
        self.outputs: list[str] = []   # what the student printed, per call, for the report
        self._proc = None
        self._conn = None
        self._load_error: errors.StudentProblem | None = None
        self._timeouts = 0

    # ------------------------------------------------------------------ public interface

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self.call(name, *args, **kwargs).value

    def call(self, fn: str, *args, opts: dict | None = None, timeout: float | None = None,
             **kwargs) -> CallResult:
        if self._timeouts >= MAX_TIMEOUTS:
            raise errors.StudentTimeout(
                f"not run: {self._timeouts} earlier calls into {self.exercise}.py ran past their "
                f"time limit, so the rest of its checks are skipped")
        self._ensure_started()
        self._truncate_capture()
        start = time.perf_counter()
        reply = self._request({"op": "call", "fn": fn, "args": list(args), "kwargs": kwargs,
                               "opts": opts or {}}, timeout or self.timeout_s, fn)
        wall = time.perf_counter() - start
        out = self._read_capture()
        if not reply.get("ok"):
            raise self._problem(reply, fn, out)
        return CallResult(reply.get("value"), out, wall, reply.get("extras") or {})

    @property
    def worker_pid(self) -> int:
        """PID of the process that runs student code (started if needed), for /proc/<pid>/status.
        Minimal stand-in until the sandbox branch provides the host PID under its namespaces."""
        self._ensure_started()
        return self._proc.pid

    def close(self) -> None:
        if self._proc is not None:
            try:
                codec.send(self._conn, {"op": "exit"})
                self._proc.join(2)
            except (OSError, ValueError):
                pass
            self._kill()

    # ------------------------------------------------------------------ worker lifecycle

    def _ensure_started(self) -> None:
        if self._load_error is not None:
            raise self._load_error
        if self._proc is not None and self._proc.is_alive():
            return
        if not self.path.exists():
            self._load_error = errors.NotSubmitted(
                f"{self.exercise}.py was not submitted: there is no {self.path.name} in "
                f"{self.directory}")
            raise self._load_error
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        cfg = {"exercise": self.exercise, "path": str(self.path), "mode": self.mode,
               "submission_dir": str(self.directory), "scratch": str(self.scratch),
               "capture_path": self.capture_path, "memory_limit_bytes": MEMORY_LIMIT_BYTES}
        from grader.sandbox import worker

        self._proc = ctx.Process(target=worker.main, args=(child, cfg), daemon=True,
                                 name=f"worker-{self.exercise}-{self.mode}")
        self._proc.start()
        child.close()
        self._conn = parent
        self._truncate_capture()
        try:
            reply = self._request({"op": "load"}, LOAD_TIMEOUT_S, "import")
        except errors.StudentProblem as e:
            self._load_error = type(e)(f"{e} (while importing {self.exercise}.py)")
            raise self._load_error from None
        if not reply.get("ok"):
            self._load_error = self._problem(reply, "import", self._read_capture())
            self._kill()
            raise self._load_error
        self._read_capture()  # keep what the module printed at import for the report

    def _request(self, msg: dict, timeout: float, what: str) -> dict:
        try:
            codec.send(self._conn, msg)
            if not self._conn.poll(timeout):
                self._kill()
                self._timeouts += 1
                raise errors.StudentTimeout(
                    f"{self._what(what)} did not finish within {timeout:.0f} s; the worker was "
                    f"stopped. Look for an infinite loop, or a size far larger than needed.")
            return codec.recv(self._conn)
        except (EOFError, OSError, BrokenPipeError):
            self._proc.join(5)
            code = self._proc.exitcode
            self._kill()
            out = shorten(self._read_capture(), 600)
            tail = f"\nIts last output:\n{out}" if out else ""
            raise errors.WorkerCrashed(
                f"the worker {describe_exit(code)} while running {self._what(what)}{tail}") from None
        except codec.CodecError as e:
            self._kill()
            raise errors.BadReturn(f"{self._what(what)} sent back something unreadable: {e}") from None

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if proc is None:
            return
        if proc.is_alive() and proc.pid:
            try:
                os.killpg(proc.pid, signal.SIGKILL)   # the worker leads its own process group
            except (ProcessLookupError, PermissionError):
                proc.kill()
        proc.join(5)

    def _what(self, fn: str) -> str:
        return f"import of {self.exercise}.py" if fn == "import" else f"{self.exercise}.{fn}()"

    # ------------------------------------------------------------------ errors and output

    def _problem(self, reply: dict, fn: str, out: str) -> Exception:
        kind = reply.get("kind")
        message = reply.get("message", "")
        tb = reply.get("traceback", "")
        if kind == "grader_error":
            return errors.GraderError(f"{message}\n{shorten(reply.get('traceback', ''), 800)}")
        if kind == "not_submitted":
            return errors.NotSubmitted(f"{self.exercise}.py was not submitted: {message}")
        if kind == "not_implemented":
            return errors.NotImplementedByStudent(
                f"{self._what(fn)} is not implemented yet: {message}")
        if kind == "bad_return":
            return errors.BadReturn(f"{self._what(fn)} returned a value the grader cannot "
                                    f"read: {message}. Return NumPy arrays, torch tensors or numbers.")
        where = "while importing" if fn == "import" else "in"
        detail = f"{reply.get('type', 'Error')}: {message}"
        if kind == "exit":
            detail = f"{message} (a submission must not exit the process)"
        text = f"{where} {self._what(fn)}: {detail}"
        if tb and kind != "exit":
            text += f"\n{shorten(tb, 1200)}"
        if out:
            text += f"\nIt printed:\n{shorten(out, 400)}"
        return errors.StudentRaised(text)

    def _truncate_capture(self) -> None:
        Path(self.capture_path).write_text("")

    def _read_capture(self) -> str:
        try:
            text = Path(self.capture_path).read_text(errors="replace")
        except OSError:
            return ""
        if text.strip():
            self.outputs.append(shorten(text))
        return shorten(text)


class Workers:
    """All workers of one grading run: one per (exercise, mode), reused across checks."""

    def __init__(self, directory: Path, scratch: Path | None = None):
        self.directory = Path(directory)
        self._own_scratch = scratch is None
        self.scratch = Path(scratch or tempfile.mkdtemp(prefix="grader-"))
        self._subs: dict[tuple[str, str], Submission] = {}

    def get(self, exercise: str, mode: str = "cpu") -> Submission:
        key = (exercise, mode)
        if key not in self._subs:
            self._subs[key] = Submission(exercise, self.directory, mode,
                                         self.scratch / f"{exercise}-{mode}")
        return self._subs[key]

    def all(self) -> list[Submission]:
        return list(self._subs.values())

    def close(self) -> None:
        for sub in self._subs.values():
            sub.close()
        self._subs.clear()
        if self._own_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
