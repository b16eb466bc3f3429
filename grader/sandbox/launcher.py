"""The one place student code starts: `launch()` starts every worker (grading, compute-sanitizer
runs, `make bench`'s student side), at the isolation level chosen by `grader.sandbox.isolation`,
under the limits written here (time per call, memory, file size, processes).

The pipe is a socketpair inherited by the worker; what the student prints goes to a capture file
the worker inherits as fd 1 and 2. The started worker is a `grader.sandbox.launched.Launched`
(requests under a deadline, the capture read back, the kill); the proxy that checks call through
is grader.sandbox.proxy (`Submission`) and grader.sandbox.workers (`Workers`).
"""

from __future__ import annotations

import json
import os
import shutil
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
from grader.sandbox import bytecode, cgroups, confine, isolation, kernel_cache, user_level
from grader.sandbox.allow_list import environment, interpreter, read_only_paths
from grader.sandbox.launched import Launched
from grader.sandbox.scratch import release as release_scratch

PACKAGE_DIR = Path(__file__).resolve().parents[1]     # the `grader` package
REPO = PACKAGE_DIR.parent

# the option timeout_scale (GRADER_TIMEOUT_SCALE) stretches (slow machine) or shrinks (the
# repo's own tests) every limit
_SCALE = options.current().timeout_scale
DEFAULT_TIMEOUT_S = {m: s * _SCALE for m, s in {"cpu": 30.0, "interp": 120.0, "cuda": 180.0}.items()}
LOAD_TIMEOUT_S = 120.0 * max(_SCALE, 1.0)   # importing torch + triton on a cold, busy 2-core machine
MAX_TIMEOUTS = 2                # after this many, further calls fail at once: a hang costs minutes, not hours
# The death signal that kills a worker with the grader (setpriv --pdeathsig, isolation.py) is
# sent when the *thread* that started it exits, not only the process: a worker started from a
# short-lived thread (a check's replays in a thread) died with that thread. Every worker
# starts from the main thread or from this one, which lives as long as the grader.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spawner")


def _popen(*args, **kwargs) -> subprocess.Popen:
    if threading.current_thread() is threading.main_thread():
        return subprocess.Popen(*args, **kwargs)
    return _SPAWNER.submit(subprocess.Popen, *args, **kwargs).result()


OUTPUT_LIMIT = 1500             # characters of student output kept per call
MEMORY_LIMIT_BYTES = 12 << 30   # address space of a CPU worker: runaway allocations fail fast
FILE_LIMIT_BYTES = 256 << 20    # largest file a worker may write: its printed output included
PROCESS_LIMIT = 4096            # RLIMIT_NPROC of the sandbox user (processes and threads), os level
SOURCE_LIMIT = 4 << 20          # largest .py file copied into the sandbox
BOOT = "import sys; sys.path.insert(0, {lib!r}); from grader.worker.worker import main; main()"


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


def _worker_lib(level: isolation.Level, base: Path) -> str:
    """The folder the worker imports the `grader` package from: bound inside the os level's
    root, a copy it may read at the user level (the grader's own folder is closed to it), a
    link to the grader's at the process level."""
    if level.name == "os":
        return confine.INSIDE_LIB
    if level.name == "user":
        user_level.open_base(base)
        return user_level.lib_copy(PACKAGE_DIR, base)
    lib_dir = base / "lib"
    if not (lib_dir / "grader").exists():
        lib_dir.mkdir(exist_ok=True)
        (lib_dir / "grader").symlink_to(PACKAGE_DIR)
    return str(lib_dir)


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
           "path": inside(Path(sources) / f"{exercise}.py", f"{confine.INSIDE_SRC}/{exercise}.py"),
           "submission_dir": inside(sources, confine.INSIDE_SRC),
           "scratch": inside(scratch, confine.INSIDE_WORK),
           "memory_limit_bytes": MEMORY_LIMIT_BYTES, "file_limit_bytes": FILE_LIMIT_BYTES,
           "process_limit": PROCESS_LIMIT if level.as_student else None}
    lib = _worker_lib(level, base)
    tmp = cfg["scratch"] if level.name == "user" else "/tmp"   # the machine's /tmp is shared there
    worker_env = {**environment(mode, cfg["scratch"], tmp), **(env or {})}
    kernels = kernel_cache.folder_for(cache, mode, level)
    if kernels is not None:
        worker_env["TRITON_CACHE_DIR"] = confine.INSIDE_CACHE if isolated else str(kernels)
        if isolated:   # bound into this worker's namespace alone
            writable = [*(writable or []), (str(kernels), confine.INSIDE_CACHE)]
    python = [interpreter(), "-I", "-B"]
    compiled = bytecode.folder_for(level)   # read-only bytecode of torch and co., where built
    if compiled is not None:
        python += ["-X", f"pycache_prefix={confine.INSIDE_PYCACHE if isolated else compiled}"]
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
                "read_only": read_only_paths(str(REPO), [str(base), str(sources)]),
                "argv": worker_argv, "env": worker_env, "tool": tool or [],
                "writable": [list(w) for w in writable or []],
                "bound": [[str(compiled), confine.INSIDE_PYCACHE]] if compiled is not None else []}
        argv = [*level.unshare, "--", interpreter(), "-I", "-S", confine.__file__,
                json.dumps(spec)]
        popen_env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    elif level.name == "user":
        # root starts the drop step (and a watching tool, which stays root); the worker, and the
        # namespaces where the student may make them, start as the student
        below = [*level.unshare, "--", *worker_argv] if level.unshare else worker_argv
        argv = [*(tool or []), *user_level.as_student(interpreter(), level.uid, level.gid, below)]
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
    return Launched(proc, conn, parent_sock, capture_fd, level, cgroup)


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
