"""The one place student code starts: `launch()` starts every worker (grading, compute-sanitizer
runs, `make bench`'s student side), at the isolation level chosen by `grader.sandbox.isolation`.

The pipe is a socketpair inherited by the worker; what the student prints goes to a capture file
the worker inherits as fd 1 and 2, read by `Launched` as a bounded head and tail. Every receive
has a deadline: a watchdog kills the worker and closes the pipe when it passes. The proxy that
checks call through (`Submission`, `Workers`) is grader.sandbox.proxy.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path

from grader import options
from grader.registry import EXERCISES
from grader.sandbox import bytecode, cgroups, isolation, kernel_cache, user_level
from grader.sandbox.scratch import release as release_scratch
from grader.wire import codec

PACKAGE_DIR = Path(__file__).resolve().parents[1]     # the `grader` package
REPO = PACKAGE_DIR.parent

# the option timeout_scale (GRADER_TIMEOUT_SCALE) stretches (slow machine) or shrinks (the
# repo's own tests) every limit
_SCALE = options.current().timeout_scale
DEFAULT_TIMEOUT_S = {m: s * _SCALE for m, s in {"cpu": 30.0, "interp": 120.0, "cuda": 180.0}.items()}
LOAD_TIMEOUT_S = 120.0 * max(_SCALE, 1.0)   # importing torch + triton on a cold, busy 2-core machine
MAX_TIMEOUTS = 2                # after this many, further calls fail at once: a hang costs minutes, not hours
WALL_MULT = 3.0                 # a CPU-clocked call is stopped at this many times its limit of wall time
# The death signal that kills a worker with the grader (setpriv --pdeathsig, isolation.py) is
# sent when the *thread* that started it exits, not only the process: a worker started from a
# short-lived thread (a check's pool of pipelined replays) died with that thread. Every worker
# starts from the main thread or from this one, which lives as long as the grader.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spawner")


def _popen(*args, **kwargs) -> subprocess.Popen:
    if threading.current_thread() is threading.main_thread():
        return subprocess.Popen(*args, **kwargs)
    return _SPAWNER.submit(subprocess.Popen, *args, **kwargs).result()
OUTPUT_LIMIT = 1500             # characters of student output kept per call
MEMORY_LIMIT_BYTES = 12 << 30   # address space of a CPU worker: runaway allocations fail fast
CAPTURE_KEEP = 64 << 10         # bytes of the capture file read from its start and from its end
SOURCE_LIMIT = 4 << 20          # largest .py file copied into the sandbox
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")   # the unit of /proc/<pid>/stat's CPU times
BOOT = "import sys; sys.path.insert(0, {lib!r}); from grader.worker.worker import main; main()"


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system, every thread) the process has used, from /proc; None when it
    is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()   # after the command name: field 3 on
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS   # utime, stime


def copy_sources(directory: Path, dest: Path) -> Path:
    """The submission's exercise files, `<exercise>.py` for each exercise of the registry (plain
    files only: no symlinks, no bytecode), copied to `dest`, read-only and owned by the grader.
    Workers import from there. Nothing else of the folder is copied: a file a library imports
    by itself (torch tries `opt_einsum`, `dill`, `tqdm`, `pydot`, `pynvml`) never reaches it."""
    dest.mkdir(parents=True, exist_ok=True)
    names = {f"{exercise}.py" for exercise in EXERCISES}
    if Path(directory).is_dir():
        for entry in os.scandir(directory):
            if entry.name not in names or not entry.is_file(follow_symlinks=False):
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


class Forged(Exception):
    """A message on the worker's socket that its serving loop did not send for the request."""


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
        self.replied = 0.0           # time.perf_counter() when the last reply came

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

    def request(self, msg: dict, timeout: float, cpu_clock: bool = False):
        """Send `msg`, return the decoded reply. TimeoutError when the whole reply (header and
        every part) has not arrived within `timeout`: the watchdog has then killed the worker.
        With `cpu_clock`, `timeout` counts the worker's own CPU seconds (every thread), so a
        call starved by other work on a busy machine is not stopped for the machine's load; it
        is stopped anyway after WALL_MULT times `timeout` of wall time (a call that sleeps).

        A reply counts only as the one message the serving loop sent for this request: it must
        carry the request's fresh tag, and the worker must then answer a ping (a tag of its
        own) with the very next message, and leave nothing behind it. Student code can reach
        the socket and read the tags, so a frame it writes during its call is either read as
        the reply, and then the loop's own reply comes where the ping's answer should
        (Forged), or it is followed by an exit, and the ping finds the worker gone (EOFError);
        bytes that are no message raise CodecError. `replied`: the clock when the reply came."""
        fired, answered = threading.Event(), threading.Event()

        def watch():
            start = time.monotonic()
            cpu0 = cpu_seconds(self.worker_pid()) if cpu_clock else None
            wait = timeout
            while not answered.wait(wait):
                cpu = cpu_seconds(self.worker_pid()) if cpu0 is not None else None
                left_wall = WALL_MULT * timeout - (time.monotonic() - start)
                if cpu is None or cpu - cpu0 >= timeout or left_wall <= 0:
                    break
                wait = max(min(timeout - (cpu - cpu0), left_wall), 0.05)
            else:
                return
            fired.set()
            self.kill()
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        watchdog = threading.Thread(target=watch, daemon=True)
        watchdog.start()
        try:
            reply = self._exchange(msg, "the reply")
            self.replied = time.perf_counter()
            pong = self._exchange({"op": "ping"}, "the answer to the ping after it")
            if not (isinstance(pong, dict) and pong.get("ok")):
                raise Forged("the message after the reply was not the serving loop's answer to "
                             "the ping that followed it")
            self._nothing_after()
        except (EOFError, OSError, codec.CodecError):
            if fired.is_set():
                raise TimeoutError from None
            raise
        finally:
            answered.set()
        if fired.is_set():
            raise TimeoutError
        return reply

    def _exchange(self, msg: dict, what: str):
        """Send `msg` under a fresh tag; the next message must carry it."""
        tag = secrets.token_hex(8)
        codec.send(self.conn, msg, tag=tag)
        got, parts = codec.receive(self.conn)
        if got != tag:
            raise Forged(f"more than one message came for one request: {what} did not "
                         f"carry its request's tag")
        return codec.decode(parts)

    def _nothing_after(self) -> None:
        """After the ping's answer the serving loop waits for the next request: nothing more may
        be in the socket. EOFError when the worker is gone (it exited after answering)."""
        try:
            data = self._sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        if not data:
            raise EOFError
        raise Forged("bytes came after the answer to the ping that followed the reply")

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
        _USER_WORKERS.discard(id(self))
        if self.level.name == "user" and not _USER_WORKERS:
            user_level.reap(isolation.interpreter(), self.level.uid)   # the machine's /tmp is shared, a PID namespace rare

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


def _worker_lib(level: isolation.Level, base: Path) -> str:
    """The folder the worker imports the `grader` package from: bound inside the os level's
    root, a copy it may read at the user level (the grader's own folder is closed to it), a
    link to the grader's at the process level."""
    if level.name == "os":
        return isolation.INSIDE_LIB
    if level.name == "user":
        user_level.open_base(base)
        return user_level.lib_copy(PACKAGE_DIR, base)
    lib_dir = base / "lib"
    if not (lib_dir / "grader").exists():
        lib_dir.mkdir(exist_ok=True)
        (lib_dir / "grader").symlink_to(PACKAGE_DIR)
    return str(lib_dir)


_USER_WORKERS: set = set()   # user-level workers not yet killed: the last one reaps the uid


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def launch(exercise: str, mode: str, sources: Path, scratch: Path, level: isolation.Level,
           tool: list[str] | None = None, env: dict | None = None,
           writable: list[tuple[str, str]] | None = None, tool_as_student: bool = False,
           cache: str = "student") -> Launched:
    """Start a worker for `exercise` (imported from `sources`) in `mode`. THE one place that
    starts student code. `tool` (e.g. compute-sanitizer and its options) runs around it, as
    root at the os level (the worker below it drops privileges); `env` adds variables to the
    worker's allow-listed environment; `writable` binds (host folder, path inside) read-write
    at the os level (a root-only folder for the tool's log). `tool_as_student`: run the tool
    after dropping privileges instead (a fallback for tools that cannot watch another user).
    `cache`: whose compiled kernels it shares in this grading run, "student" or "replay"
    (grader.sandbox.kernel_cache)."""
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
           "process_limit": isolation.PROCESS_LIMIT if level.as_student else None}
    lib = _worker_lib(level, base)
    tmp = cfg["scratch"] if level.name == "user" else "/tmp"   # the machine's /tmp is shared there
    worker_env = {**isolation.environment(mode, cfg["scratch"], tmp), **(env or {})}
    kernels = kernel_cache.folder_for(cache, mode, level)
    if kernels is not None:
        worker_env["TRITON_CACHE_DIR"] = isolation.INSIDE_CACHE if isolated else str(kernels)
        if isolated:   # bound into this worker's namespace alone
            writable = [*(writable or []), (str(kernels), isolation.INSIDE_CACHE)]
    python = [isolation.interpreter(), "-I", "-B"]
    compiled = bytecode.folder_for(level)   # read-only bytecode of torch and co., where built
    if compiled is not None:
        python += ["-X", f"pycache_prefix={isolation.INSIDE_PYCACHE if isolated else compiled}"]
    worker_argv = [*python, "-c", BOOT.format(lib=lib), json.dumps(cfg)]
    if tool and (tool_as_student or not level.as_student):
        worker_argv, tool = [*tool, *worker_argv], None
    if level.as_student:
        os.chown(scratch, level.uid, level.gid)
        scratch.chmod(0o700)
    if isolated:
        root = base / f"root-{scratch.name}"
        root.mkdir(mode=0o700, exist_ok=True)
        spec = {"root": str(root), "grader": str(PACKAGE_DIR), "sources": str(sources),
                "scratch": str(scratch), "uid": level.uid, "gid": level.gid,
                "read_only": isolation.read_only_paths(str(REPO), [str(base), str(sources)]),
                "argv": worker_argv, "env": worker_env, "tool": tool or [],
                "writable": [list(w) for w in writable or []],
                "bound": [[str(compiled), isolation.INSIDE_PYCACHE]] if compiled is not None else []}
        argv = [*level.unshare, "--", isolation.interpreter(), "-I", "-S", isolation.__file__,
                json.dumps(spec)]
        popen_env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    elif level.name == "user":
        # root starts the drop step (and a watching tool, which stays root); the worker, and the
        # namespaces where the student may make them, start as the student
        below = [*level.unshare, "--", *worker_argv] if level.unshare else worker_argv
        argv = [*(tool or []), *user_level.as_student(isolation.interpreter(), level.uid, level.gid, below)]
        popen_env = worker_env
    else:
        argv = [*level.unshare, *(["--"] if level.unshare else []), *worker_argv]
        popen_env = worker_env
    if level.as_student:
        cgroup = cgroups.WorkerCgroup.make(f"grader-{os.getpid()}-{time.monotonic_ns()}")
        if cgroup is not None:
            argv = cgroup.wrap(argv)
    try:
        proc = _popen(argv, stdin=subprocess.DEVNULL, stdout=capture_fd, stderr=capture_fd,
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
    launched = Launched(proc, conn, parent_sock, capture_fd, level, cgroup)
    if level.name == "user":
        _USER_WORKERS.add(id(launched))
    return launched


def remove_tree(path: Path) -> None:
    """rmtree that also removes the read-only sources folder when not run as root, and first
    unmounts the run's scratch tmpfs (grader.sandbox.scratch) on or below `path`."""
    release_scratch(Path(path))
    for folder in Path(path).glob("sources*"):
        try:
            folder.chmod(0o755)
        except OSError:
            pass
    shutil.rmtree(path, ignore_errors=True)
