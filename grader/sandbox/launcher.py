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

This module is the only one that starts student code: `launch()` starts every worker (grading,
compute-sanitizer runs, `make bench`'s student side), at the isolation level chosen by
`grader.sandbox.isolation`. The pipe is a socketpair inherited by the worker; what the student
prints goes to a capture file the worker inherits as fd 1 and 2, read here as a bounded head and
tail. Every receive has a deadline: a watchdog kills the worker and closes the pipe when it passes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

from grader import errors
from grader.sandbox import budget, isolation
from grader.wire import codec

GRADER_DIR = Path(__file__).resolve().parents[1]     # the `grader` package
REPO = GRADER_DIR.parent

# GRADER_TIMEOUT_SCALE stretches (slow machine) or shrinks (the repo's own tests) every limit
_SCALE = float(os.environ.get("GRADER_TIMEOUT_SCALE", "1"))
DEFAULT_TIMEOUT_S = {m: s * _SCALE for m, s in {"cpu": 30.0, "interp": 120.0, "cuda": 180.0}.items()}
LOAD_TIMEOUT_S = 120.0 * max(_SCALE, 1.0)   # importing torch + triton on a cold, busy 2-core machine
MAX_TIMEOUTS = 2                # after this many, further calls fail at once: a hang costs minutes, not hours
OUTPUT_LIMIT = 1500             # characters of student output kept per call
MEMORY_LIMIT_BYTES = 12 << 30   # address space of a CPU worker: runaway allocations fail fast
CAPTURE_KEEP = 64 << 10         # bytes of the capture file read from its start and from its end
SOURCE_LIMIT = 4 << 20          # largest .py file copied into the sandbox
BOOT = "import sys; sys.path.insert(0, {lib!r}); from grader.worker.worker import main; main()"


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

    def __init__(self, exercise: str, directory: Path, mode: str, scratch: Path,
                 sources: Path | None = None, level: isolation.Level | None = None,
                 tool: list[str] | None = None, env: dict | None = None,
                 writable: list[tuple[str, str]] | None = None, tool_as_student: bool = False):
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
        self.timeout_s = DEFAULT_TIMEOUT_S[mode]
        self.outputs: list[str] = []   # what the student printed, per call, for the report
        self._worker: Launched | None = None
        self._load_error: errors.StudentProblem | None = None
        self._timeouts = 0

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
        wall = time.perf_counter() - start
        out = self._read_capture()
        if not isinstance(reply, dict) or not reply.get("ok"):
            raise self._problem(reply if isinstance(reply, dict) else {}, fn, out)
        extras = reply.get("extras")
        return CallResult(reply.get("value"), out, wall, extras if isinstance(extras, dict) else {})

    def close(self, wait_s: float = 2.0) -> int | None:
        """Stop the worker; its exit status (None if it had to be killed)."""
        worker, self._worker = self._worker, None
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
        if self.level.name == "unavailable":
            self._load_error = errors.GraderError(
                f"student code was not run: {self.level.description}. Run as root with "
                f"`unshare` available, or set GRADER_SANDBOX=0 to grade without OS isolation.")
            raise self._load_error
        if not (self.sources / f"{self.exercise}.py").is_file():
            self._load_error = errors.NotSubmitted(
                f"{self.exercise}.py was not submitted: there is no {self.path.name} in "
                f"{_label(self.directory)}" + ("" if not self.path.exists() else
                                       " that is a plain file of at most 4 MiB"))
            raise self._load_error
        try:
            self._worker = launch(self.exercise, self.mode, self.sources, self.scratch, self.level,
                                  tool=self.tool, env=self.extra_env, writable=self.writable,
                                  tool_as_student=self.tool_as_student)
        except OSError as e:
            raise errors.GraderError(f"could not start a worker: {e}") from None
        try:
            reply = self._request({"op": "load"}, LOAD_TIMEOUT_S, "import")
        except errors.StudentProblem as e:
            self._load_error = type(e)(f"{e} (while importing {self.exercise}.py)")
            raise self._load_error from None
        if not isinstance(reply, dict) or not reply.get("ok"):
            self._load_error = self._problem(reply if isinstance(reply, dict) else {}, "import",
                                             self._read_capture())
            self._kill()
            raise self._load_error
        self._read_capture()  # keep what the module printed at import for the report

    def _request(self, msg: dict, timeout: float, what: str):
        worker = self._worker
        try:
            return worker.request(msg, timeout)
        except TimeoutError:
            self._kill()
            self._timeouts += 1
            raise errors.StudentTimeout(
                f"{self._what(what)} did not finish within {timeout:.0f} s; the worker was "
                f"stopped. Look for an infinite loop, or a size far larger than needed.") from None
        except (EOFError, OSError):
            code = worker.stop(5)
            self._kill()
            out = shorten(self._read_capture(keep=False), 600)
            tail = f"\nIts last output:\n{out}" if out else ""
            raise errors.WorkerCrashed(
                f"the worker {describe_exit(code)} while running {self._what(what)}{tail}") from None
        except codec.CodecError as e:
            self._kill()
            raise errors.BadReturn(f"{self._what(what)} sent back something the grader cannot "
                                   f"read: {e}. Return NumPy arrays, torch tensors or numbers.") from None

    def _kill(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.kill()
            self._last_capture = worker   # its output stays readable for the message
            worker.close_files(keep_capture=True)

    def _what(self, fn: str) -> str:
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
        text = f"in {self._what(fn)}: {detail}"
        if tb and kind != "exit":
            text += f"\n{shorten(tb, 1200)}"
        if out:
            text += f"\nIt printed:\n{shorten(out, 400)}"
        return errors.StudentRaised(text)

    def _read_capture(self, keep: bool = True) -> str:
        worker = self._worker or getattr(self, "_last_capture", None)
        text = worker.read_capture() if worker is not None else ""
        if keep and text.strip():
            self.outputs.append(shorten(text))
        return shorten(text)


# ---------------------------------------------------------------------------------- launching


def _label(directory: Path) -> str:
    """How messages name the submission folder: its path, or what GRADER_SUBMISSION_LABEL says
    (run_autograder grades a temporary copy of the upload: its path would mean nothing)."""
    return os.environ.get("GRADER_SUBMISSION_LABEL") or str(directory)


def copy_sources(directory: Path, dest: Path) -> Path:
    """The submission's top-level `.py` files (plain files only: no symlinks, no bytecode),
    copied to `dest`, read-only and owned by the grader. Workers import from there."""
    dest.mkdir(parents=True, exist_ok=True)
    if Path(directory).is_dir():
        for entry in os.scandir(directory):
            if not entry.name.endswith(".py") or not entry.is_file(follow_symlinks=False):
                continue
            try:
                fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW)
                with os.fdopen(fd, "rb") as f:
                    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                        continue
                    data = f.read(SOURCE_LIMIT + 1)
            except OSError:
                continue
            if len(data) > SOURCE_LIMIT:
                continue
            target = dest / entry.name
            target.write_bytes(data)
            target.chmod(0o444)
    dest.chmod(0o555)
    return dest


class Launched:
    """A running worker: its process, its pipe, its capture file."""

    def __init__(self, proc: subprocess.Popen, conn: Connection, sock: socket.socket,
                 capture_fd: int, level: isolation.Level, cgroup=None):
        self.proc = proc
        self.cgroup = cgroup
        self.conn = conn
        self._sock = sock            # the same socket as conn, to shut it down from the watchdog
        self.capture_fd = capture_fd
        self.level = level
        self._pid: int | None = None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def worker_pid(self) -> int:
        """Host PID of the process running student code: under `unshare --fork` the child of
        unshare (PID 1 of its namespace), else the process itself."""
        if self._pid is None:
            self._pid = self.proc.pid
            if self.level.unshare:
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline:
                    children = _children(self.proc.pid)
                    if children:
                        self._pid = children[0]
                        break
                    time.sleep(0.002)
        return self._pid

    def request(self, msg: dict, timeout: float):
        """Send `msg`, return the decoded reply. TimeoutError when the whole reply (header and
        every part) has not arrived within `timeout`: the watchdog has then killed the worker."""
        fired = threading.Event()

        def expire():
            fired.set()
            self.kill()
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        timer = threading.Timer(timeout, expire)
        timer.daemon = True
        timer.start()
        try:
            codec.send(self.conn, msg)
            reply = codec.recv(self.conn)
        except (EOFError, OSError, codec.CodecError):
            if fired.is_set():
                raise TimeoutError from None
            raise
        finally:
            timer.cancel()
        if fired.is_set():
            raise TimeoutError
        return reply

    def truncate_capture(self) -> None:
        os.ftruncate(self.capture_fd, 0)

    def read_capture(self) -> str:
        """What the worker printed since the last truncate: its first and last CAPTURE_KEEP
        bytes, whatever the file's size (printing 2 GiB costs the grader 128 KiB)."""
        try:
            size = os.fstat(self.capture_fd).st_size
            if size <= 2 * CAPTURE_KEEP:
                data = os.pread(self.capture_fd, size, 0)
                return data.decode(errors="replace")
            head = os.pread(self.capture_fd, CAPTURE_KEEP, 0).decode(errors="replace")
            tail = os.pread(self.capture_fd, CAPTURE_KEEP, size - CAPTURE_KEEP).decode(errors="replace")
        except (OSError, ValueError):
            return ""
        return f"{head}\n... [{size - 2 * CAPTURE_KEEP} bytes cut] ...\n{tail}"

    def stop(self, wait_s: float) -> int | None:
        """Ask the worker to exit, wait up to wait_s, then kill it. Its exit status."""
        if self.alive():
            try:
                codec.send(self.conn, {"op": "exit"})
            except (OSError, ValueError):
                pass
            try:
                self.proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                pass
        code = self.proc.poll()
        self.kill()
        return code

    def kill(self) -> None:
        """SIGKILL the worker and everything it started: the PID namespace's init (all of its
        processes die with it), else the worker's process group."""
        proc = self.proc
        if self.level.unshare and self._pid is None and proc.poll() is None:
            self.worker_pid()
        for target in ([self._pid] if self.level.unshare and self._pid else []):
            try:
                os.kill(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)   # the worker (or unshare) leads its own group
            except (ProcessLookupError, PermissionError):
                proc.kill()
        # unshare is reaped only once every process of the namespace is gone (a thousand forked
        # processes take a few seconds): the report is written after that
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            pass

    def close_files(self, keep_capture: bool = False) -> None:
        if self.cgroup is not None and self.proc.poll() is not None:
            self.cgroup.remove()
            self.cgroup = None   # one that could not be removed yet stays (empty) until reboot
        for f in (self.conn, self._sock):
            try:
                f.close()
            except OSError:
                pass
        if not keep_capture and self.capture_fd >= 0:
            os.close(self.capture_fd)
            self.capture_fd = -1

    def __del__(self):
        if getattr(self, "capture_fd", -1) >= 0:
            try:
                os.close(self.capture_fd)
            except OSError:
                pass


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def launch(exercise: str, mode: str, sources: Path, scratch: Path, level: isolation.Level,
           tool: list[str] | None = None, env: dict | None = None,
           writable: list[tuple[str, str]] | None = None, tool_as_student: bool = False) -> Launched:
    """Start a worker for `exercise` (imported from `sources`) in `mode`. THE one place that
    starts student code. `tool` (e.g. compute-sanitizer and its options) runs around it, as
    root at the os level (the worker below it drops privileges); `env` adds variables to the
    worker's allow-listed environment; `writable` binds (host folder, path inside) read-write
    at the os level (a root-only folder for the tool's log). `tool_as_student`: run the tool
    after dropping privileges instead (a fallback for tools that cannot watch another user)."""
    scratch = Path(scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    base = scratch.parent
    capture = base / f"capture-{scratch.name}-{time.monotonic_ns()}"
    capture_fd = os.open(capture, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600)
    os.unlink(capture)   # only the two open descriptors reach it: no path to plant a link at
    parent_sock, child_sock = socket.socketpair()
    isolated = level.name == "os"
    cgroup = None
    inside = (lambda host, path: path if isolated else str(host))
    cfg = {"exercise": exercise, "mode": mode, "conn_fd": child_sock.fileno(), "capture_fd": capture_fd,
           "path": inside(Path(sources) / f"{exercise}.py", f"{isolation.INSIDE_SRC}/{exercise}.py"),
           "submission_dir": inside(sources, isolation.INSIDE_SRC),
           "scratch": inside(scratch, isolation.INSIDE_WORK),
           "memory_limit_bytes": MEMORY_LIMIT_BYTES, "file_limit_bytes": isolation.FILE_LIMIT_BYTES,
           "process_limit": isolation.PROCESS_LIMIT if isolated else None}
    if isolated:
        lib = isolation.INSIDE_LIB
    else:
        lib_dir = base / "lib"
        if not (lib_dir / "grader").exists():
            lib_dir.mkdir(exist_ok=True)
            (lib_dir / "grader").symlink_to(GRADER_DIR)
        lib = str(lib_dir)
    worker_env = {**isolation.environment(mode, cfg["scratch"]), **(env or {})}
    worker_argv = [sys.executable, "-I", "-B", "-c", BOOT.format(lib=lib), json.dumps(cfg)]
    if tool and (tool_as_student or not isolated):
        worker_argv, tool = [*tool, *worker_argv], None
    if isolated:
        os.chown(scratch, level.uid, level.gid)
        scratch.chmod(0o700)
        root = base / f"root-{scratch.name}"
        root.mkdir(mode=0o700, exist_ok=True)
        spec = {"root": str(root), "grader": str(GRADER_DIR), "sources": str(sources),
                "scratch": str(scratch), "uid": level.uid, "gid": level.gid,
                "read_only": isolation.read_only_paths(str(REPO), [str(base), str(sources)]),
                "argv": worker_argv, "env": worker_env, "tool": tool or [],
                "writable": [list(w) for w in writable or []]}
        argv = [*level.unshare, "--", sys.executable, "-I", "-S", isolation.__file__, json.dumps(spec)]
        popen_env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        cgroup = isolation.WorkerCgroup.make(f"grader-{os.getpid()}-{time.monotonic_ns()}")
        if cgroup is not None:
            argv = cgroup.wrap(argv)
    else:
        argv = [*level.unshare, *(["--"] if level.unshare else []), *worker_argv]
        popen_env = worker_env
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=capture_fd, stderr=capture_fd,
                                pass_fds=(child_sock.fileno(), capture_fd), env=popen_env,
                                cwd=str(scratch), start_new_session=True)
    except BaseException:
        for f in (parent_sock, child_sock):
            f.close()
        os.close(capture_fd)
        if cgroup is not None:
            cgroup.remove()
        raise
    child_sock.close()
    conn = Connection(os.dup(parent_sock.fileno()))
    return Launched(proc, conn, parent_sock, capture_fd, level, cgroup)


class Workers:
    """All workers of one grading run: one per (exercise, mode), reused across checks; where
    memory is short (grader.sandbox.budget), only the current exercise's are kept alive.

    `sources` holds the read-only copy of the submission's `.py` files that every worker imports
    (made once per run); `isolation` describes the level the workers run at."""

    def __init__(self, directory: Path, scratch: Path | None = None):
        self.directory = Path(directory)
        self._own_scratch = scratch is None
        self.scratch = Path(scratch or tempfile.mkdtemp(prefix="grader-"))
        self.level = isolation.choose()
        self.isolation = self.level.description
        self.sources = copy_sources(self.directory, self.scratch / "sources")
        self._subs: dict[tuple[str, str], Submission] = {}

    def get(self, exercise: str, mode: str = "cpu") -> Submission:
        key = (exercise, mode)
        if budget.one_exercise_at_a_time():   # little memory: stop the other exercises' workers
            for (other, _), sub in self._subs.items():
                if other != exercise:
                    sub.close()
        if key not in self._subs:
            self._subs[key] = Submission(exercise, self.directory, mode,
                                         self.scratch / f"{exercise}-{mode}", self.sources, self.level)
        return self._subs[key]

    def all(self) -> list[Submission]:
        return list(self._subs.values())

    def close(self) -> None:
        for sub in self._subs.values():
            sub.close()
        self._subs.clear()
        if self._own_scratch:
            remove_tree(self.scratch)


def remove_tree(path: Path) -> None:
    """rmtree that also removes the read-only sources folder when not run as root."""
    for folder in Path(path).glob("sources*"):
        try:
            folder.chmod(0o755)
        except OSError:
            pass
    shutil.rmtree(path, ignore_errors=True)
