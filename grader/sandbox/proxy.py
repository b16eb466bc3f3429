"""The proxy: how trusted checks call student functions without importing them, one
`Submission` (an exercise of a submission, in one mode) at a time.

    online = workers.get("online_softmax")          # a Submission (grader.sandbox.workers)
    y = online.softmax_safe(x)                       # runs in the worker, returns decoded values
    r = online.call("tiled_attention", Q, K, V, opts={"tracemalloc": True})
    r.value, r.stdout, r.extras["peak_bytes"], r.wall_s

Every call has a time limit. A worker that dies (segfault, os._exit, illegal memory access,
out of memory) or runs past its limit is killed and the call raises the matching
`grader.errors` exception with a clear message; the next call starts a fresh worker. An error at
import (SyntaxError, missing file, an exception, sys.exit) is remembered and raised by every call
without starting another worker. Workers start only through grader.sandbox.launcher.launch.
"""

from __future__ import annotations

import signal
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from grader import errors, options
from grader.sandbox import budget, calllog, isolation
from grader.sandbox.launched import Forged, Launched
from grader.sandbox.launcher import (DEFAULT_TIMEOUT_S, LOAD_TIMEOUT_S, MAX_TIMEOUTS, OUTPUT_LIMIT,
                                     copy_sources, launch)
from grader.wire import codec


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


# the Submissions whose worker is running, in this process
_LIVE: weakref.WeakSet = weakref.WeakSet()


class Submission:
    """One exercise of one submission, run in one mode ("cpu", "interp" or "cuda"). Its worker
    starts on first use and is kept for the next call; where memory allows only one worker at a
    time (grader.sandbox.budget), starting one stops every other (each starts again, importing
    the submission afresh, when it is next used)."""

    def __init__(self, exercise: str, directory: Path, mode: str, scratch: Path,
                 sources: Path | None = None, level: isolation.Level | None = None,
                 tool: list[str] | None = None, env: dict | None = None,
                 writable: list[tuple[str, str]] | None = None, tool_as_student: bool = False,
                 cache: str = "student"):
        self.exercise = exercise
        self.directory = Path(directory).resolve()
        self.sources = Path(sources) if sources is not None else copy_sources(
            self.directory, Path(scratch).parent / f"sources-{exercise}-{mode}")
        self.path = self.directory / f"{exercise}.py"
        self.mode = mode
        self.scratch = Path(scratch)
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.level = level or isolation.choose()
        self.tool = tool            # e.g. compute-sanitizer's command line, run around the worker
        self.extra_env = env or {}
        self.writable = writable
        self.tool_as_student = tool_as_student
        self.cache = cache          # whose compiled kernels it shares (grader.sandbox.kernel_cache)
        self.timeout_s = DEFAULT_TIMEOUT_S[mode]
        self.outputs: list[str] = []   # what the student printed, per call, for the report
        self._worker: Launched | None = None
        self._load_error: errors.StudentProblem | None = None
        self._timeouts = 0
        self.seccomp = ""   # the filter's level, from the worker's first reply

    # ------------------------------------------------------------------ public interface

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self.call(name, *args, **kwargs).value

    @property
    def worker_pid(self) -> int:
        """Host PID of the process that runs student code (starting it if needed)."""
        self._ensure_started()
        return self._worker.worker_pid()

    def call(self, fn: str, *args, opts: dict | None = None, timeout: float | None = None,
             **kwargs) -> CallResult:
        if self._timeouts >= MAX_TIMEOUTS:
            raise errors.StudentTimeout(
                f"not run: {self._timeouts} earlier calls into {self.exercise}.py ran past their "
                f"time limit, so the rest of its checks are skipped")
        self._ensure_started()
        self._worker.truncate_capture()
        start = time.perf_counter()
        reply = self._request({"op": "call", "fn": fn, "args": list(args), "kwargs": kwargs,
                               "opts": opts or {}}, timeout or self.timeout_s, fn)
        wall = self._worker.replied - start   # the ping that confirms the reply is not the call's
        calllog.record("call", self.exercise, self.mode, wall, fn=fn, opts=sorted(opts or {}))
        out = self._read_capture()
        if not isinstance(reply, dict) or not reply.get("ok"):
            raise self._problem(reply if isinstance(reply, dict) else {}, fn, out)
        extras = reply.get("extras")
        return CallResult(reply.get("value"), out, wall, extras if isinstance(extras, dict) else {})

    def replay(self, args: list, program: dict, opts: dict, module: str | None = None):
        """A replay worker's answer to `program` (grader.worker.replay) on inputs built from
        `args` (the original call's markers), with the kernels of `module` (default: this
        worker's exercise): its decoded value."""
        self._ensure_started()
        self._worker.truncate_capture()
        start = time.perf_counter()
        reply = self._request({"op": "replay", "args": list(args), "program": program,
                               "opts": opts, "module": module}, self.timeout_s, "replay")
        calllog.record("replay", self.exercise, self.mode, time.perf_counter() - start)
        out = self._read_capture(keep=False)
        if not isinstance(reply, dict) or not reply.get("ok"):
            raise self._problem(reply if isinstance(reply, dict) else {}, "replay", out)
        return reply.get("value")

    def close(self, wait_s: float = 2.0) -> int | None:
        """Stop the worker; its exit status (None if it had to be killed)."""
        worker, self._worker = self._worker, None
        _LIVE.discard(self)
        if worker is None:
            return None
        code = worker.stop(wait_s)
        worker.close_files()
        return code

    # ------------------------------------------------------------------ worker lifecycle

    def _ensure_started(self) -> None:
        if self._load_error is not None:
            raise self._load_error
        if self._worker is not None and self._worker.alive():
            return
        if self._worker is not None:   # gone since its last answer, when none of its code ran
            code = self._worker.proc.poll()
            self._kill()
            raise errors.WorkerCrashed(
                f"the worker {describe_exit(code)} between two calls into {self.exercise}.py, "
                f"while no call was running: this call is not run (the next starts a new worker)")
        if self.level.name == "unavailable":
            self._load_error = errors.GraderError(
                f"student code was not run: {self.level.description}. Run as root with "
                f"`unshare` available, or set GRADER_SANDBOX=0 to grade without OS isolation.")
            raise self._load_error
        if not (self.sources / f"{self.exercise}.py").is_file():
            self._load_error = errors.NotSubmitted(
                f"{self.exercise}.py was not submitted: there is no {self.path.name} in "
                f"{label(self.directory)}" + ("" if not self.path.exists() else
                                       " that is a plain file of at most 4 MiB"))
            raise self._load_error
        if budget.one_worker_at_a_time():   # 768 MB: the grader and one worker of torch fit
            for other in list(_LIVE):
                if other is not self:
                    other.close()
        started = time.perf_counter()
        try:
            self._worker = launch(self.exercise, self.mode, self.sources, self.scratch, self.level,
                                  tool=self.tool, env=self.extra_env, writable=self.writable,
                                  tool_as_student=self.tool_as_student, cache=self.cache)
        except OSError as e:
            raise errors.GraderError(f"could not start a worker: {e}") from None
        _LIVE.add(self)
        try:   # before any student code runs: a failure here is the sandbox's, not the student's
            pong = self._request({"op": "ping"}, LOAD_TIMEOUT_S, "ping")
        except errors.StudentProblem as e:
            self._kill()
            self._load_error = errors.GraderError(f"the worker could not start: {e}")
            raise self._load_error from None
        # what the kernel denies this worker (grader.worker.seccomp), said before any student
        # code ran, so it can be believed
        self.seccomp = str(pong.get("seccomp", "") if isinstance(pong, dict) else "")[:200]
        try:
            reply = self._request({"op": "load"}, LOAD_TIMEOUT_S, "import")
        except errors.StudentProblem as e:   # the import hung or crashed the worker
            self._load_error = errors.ImportFailed(f"{e} (while importing {self.exercise}.py)",
                                                   status=e.status)
            raise self._load_error from None
        if not isinstance(reply, dict) or not reply.get("ok"):
            self._load_error = self._problem(reply if isinstance(reply, dict) else {}, "import",
                                             self._read_capture())
            self._kill()
            raise self._load_error
        self._read_capture()  # keep what the module printed at import for the report
        calllog.record("start", self.exercise, self.mode, time.perf_counter() - started,
                       tool=bool(self.tool))

    def _request(self, msg: dict, timeout: float, what: str):
        worker = self._worker
        try:
            return worker.request(msg, timeout, cpu_clock=self.mode != "cuda")
        except TimeoutError:
            self._kill()
            self._timeouts += 1
            clock = "" if self.mode == "cuda" else " of CPU time"
            raise errors.StudentTimeout(
                f"{self._what(what)} did not finish within {timeout:.0f} s{clock}; the worker was "
                f"stopped. Look for an infinite loop, or a size far larger than needed.") from None
        except (EOFError, OSError):
            code = worker.stop(5)
            self._kill()
            out = shorten(self._read_capture(keep=False), 600)
            tail = f"\nIts last output:\n{out}" if out else ""
            if "Thread creation failed" in out:   # libgomp aborts: torch.set_num_threads(n > 1)
                tail += ("\nThe grader runs the exercise without threads or processes (the "
                         "lesson's code needs neither): leave torch's thread count as it is.")
            raise errors.WorkerCrashed(
                f"the worker {describe_exit(code)} while running {self._what(what)}{tail}") from None
        except (Forged, codec.CodecError) as e:
            # the serving loop sends one well-formed message per request, its own reply: these
            # were written by student code (launched.Launched.request), so nothing counts again
            self._kill()
            why = str(e) if isinstance(e, Forged) else f"the reply could not be read ({e})"
            self._load_error = errors.ForgedReply(
                f"not run: an earlier call into {self.exercise}.py wrote to the worker's channel "
                f"to the grader ({why}), so no later call of it counts")
            raise errors.ForgedReply(
                f"{self._what(what)} wrote to the worker's channel to the grader: {why}. Only the "
                f"worker's own reply counts; this call, and every later call of "
                f"{self.exercise}.py, count for nothing") from None

    def _kill(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.kill()
            self._last_capture = worker   # its output stays readable for the message
            worker.close_files(keep_capture=True)

    def _what(self, fn: str) -> str:
        if fn == "ping":
            return "its start, before any of the submission's code"
        return f"the import of {self.exercise}.py" if fn == "import" else f"{self.exercise}.{fn}()"

    # ------------------------------------------------------------------ errors and output

    def _problem(self, reply: dict, fn: str, out: str) -> Exception:
        kind = str(reply.get("kind"))
        message = str(reply.get("message", ""))[:2000]
        tb = str(reply.get("traceback", ""))
        if kind == "grader_error":
            return errors.GraderError(f"{message}\n{shorten(tb, 800)}")
        if kind == "not_submitted":
            return errors.NotSubmitted(f"{self.exercise}.py was not submitted: {message}")
        if kind == "not_implemented":
            return errors.NotImplementedByStudent(
                f"{self._what(fn)} is not implemented yet: {message}")
        if kind == "bad_return":
            return errors.BadReturn(f"{self._what(fn)} returned a value the grader cannot "
                                    f"read: {message}. Return NumPy arrays, torch tensors or numbers.")
        detail = f"{str(reply.get('type', 'Error'))[:100]}: {message}"
        if kind == "exit":
            detail = f"{message} (a submission must not exit the process)"
        where = reply.get("where") if isinstance(reply.get("where"), dict) else None
        if where:   # as a compiler says it: folder/file.py:line: Error: message, then the line
            detail = f"{label(self.directory)}/{where.get('file')}:{where.get('line')}: {detail}"
            if where.get("code"):
                detail += f"\n    {where['code']}"
        text = detail if fn == "import" and where else f"in {self._what(fn)}: {detail}"
        if tb and kind != "exit" and not (fn == "import" and where):
            text += f"\n{shorten(tb, 1200)}"
        if out:
            text += f"\nIt printed:\n{shorten(out, 400)}"
        return errors.ImportFailed(text) if fn == "import" else errors.StudentRaised(text)

    def _read_capture(self, keep: bool = True) -> str:
        worker = self._worker or getattr(self, "_last_capture", None)
        text = worker.read_capture() if worker is not None else ""
        if keep and text.strip():
            self.outputs.append(shorten(text))
        return shorten(text)


def label(directory: Path) -> str:
    """How messages name the submission folder: its path, or the option label (--label:
    run_autograder grades a temporary copy of the upload, whose path would mean nothing)."""
    return options.current().label or str(directory)
