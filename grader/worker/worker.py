"""The worker: the only process that imports and runs student code.

Started by `grader.sandbox.launcher.launch` (one per exercise and mode, inside the sandbox of
`grader.sandbox.isolation`), it loads `<exercise>.py` by path from the read-only copy of the
submission's sources, then answers call requests over an inherited socket until told to stop. Nothing it sends back is
trusted: verdicts are made by the process that started it, from the values it returns (decoded by
`grader.wire.codec`, never unpickled). What student code prints goes to a capture file (inherited
as fd 1 and 2) that the trusted side reads, also after a crash.

Modes: "cpu" (NumPy exercises), "interp" (Triton kernels on the CPU, TRITON_INTERPRET=1),
"cuda" (real kernels). The mode is fixed before any import, since Triton reads it at import.

Before the submission is imported the worker walls itself off (`wall_off`): the libraries the
mode needs are loaded, the environment and argv become fixed values, imports of the exercise
files go through an allow-list (grader.worker.imports), and in the CPU modes a seccomp filter
refuses every new process, exec and thread (grader.worker.seccomp). Its level is the ping
reply's "seccomp", which the report names.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import json
import os
import resource
import signal
import sys
import time
import traceback

from grader.worker import call_inputs, imports, probes, replay, seccomp
from grader.worker.failures import failure
from grader.wire import checksum, codec, framing
from grader.wire.threads import ONE_THREAD

# What the exercise's code sees of the environment, the same in every call of a mode (sanitized,
# profiled, timed, hidden or plain): what the lesson's code reads (TRITON_INTERPRET) and what the
# libraries read while they run (PATH and the CUDA folders for Triton's ptxas and gcc, its
# cache, tempfile's TMPDIR, the GPU's visibility, the one-thread settings)
ENV_KEPT = ("PATH", "HOME", "TMPDIR", "LANG", "TRITON_INTERPRET", "TRITON_CACHE_DIR",
            "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "TRITON_PTXAS_PATH",
            "TRITON_LIBCUDA_PATH", *ONE_THREAD)


def main() -> None:
    """Entry point of the worker process, started by `grader.sandbox.launcher` with
    `python -I -B -c BOOT CONFIG`: CONFIG is JSON; the pipe to the trusted side and the capture
    file arrive as inherited file descriptors."""
    from multiprocessing.connection import Connection

    cfg = json.loads(sys.argv[1])
    os.dup2(cfg["capture_fd"], 1)   # anything printed, even outside a call, lands in the capture
    os.dup2(cfg["capture_fd"], 2)
    with contextlib.suppress(OSError):
        os.setsid()  # own process group: a timeout kills the student's children too
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a flood past the file limit fails the write
    if cfg["mode"] == "interp":
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    if cfg["mode"] in ("cpu", "interp"):
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # CPU modes never touch a GPU
    # one BLAS/OpenMP thread, read when torch loads (now, or when a CPU exercise imports it):
    # no thread pool is started once the seccomp filter refuses new threads
    os.environ.update(ONE_THREAD)
    limit = cfg.get("memory_limit_bytes")
    if limit and cfg["mode"] != "cuda":  # CUDA reserves huge address ranges; rely on its OOM
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if cfg.get("file_limit_bytes"):
        n = cfg["file_limit_bytes"]
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if cfg.get("process_limit"):   # a fork bomb stops here (the sandbox user's processes and threads)
        n = cfg["process_limit"]
        resource.setrlimit(resource.RLIMIT_NPROC, (n, n))
    if cfg["mode"] == "interp":
        _patch_interpreter_index()
    os.chdir(cfg["scratch"])  # files the student writes land in scratch, not in the repo
    # last: the exercise files import each other (bench_attn: `from flash_triton import ...`),
    # but nothing there can stand in for a library or a module of the standard library
    sys.path.append(cfg["submission_dir"])
    conn = Connection(cfg["conn_fd"])
    Worker(conn, cfg, wall_off(cfg)).serve()


def wall_off(cfg: dict) -> str:
    """Close the worker before the submission is imported (its import runs student code): warm
    the libraries the mode needs, so none starts a thread or a tool later; fix the environment
    and argv; install the import allow-list and the seccomp filter. Returns the filter's level.

    In the CPU modes the filter refuses processes, exec and threads. On the GPU it is not
    installed: Triton compiles each kernel with ptxas (and its driver stub with gcc), so exec
    and fork must work there; the answer's provenance (recorded kernel launches) is what
    judges a Triton answer on every layer (docs/SECURITY.md)."""
    import numpy  # noqa: F401 - every mode
    if cfg["mode"] in ("interp", "cuda"):
        import torch
        import triton  # noqa: F401
        import triton.language  # noqa: F401

        torch.set_num_threads(1)   # no intra-op pool to start inside a call
    fix_environment(cfg["mode"])
    sys.argv = ["-c"]           # what `python -c` leaves, without the worker's configuration
    sys.orig_argv = [sys.executable, "-c"]
    imports.AllowList(cfg["submission_dir"]).install()
    if cfg["mode"] == "cuda":
        return "off on the GPU: Triton compiles kernels with ptxas and gcc"
    return seccomp.install(threads=True)


def fix_environment(mode: str) -> None:
    """os.environ becomes ENV_KEPT's variables, the same in every call of the mode. In the CPU
    modes the C-level block goes too (unsetenv). On the GPU it stays as it was started (putenv
    puts it back below os.environ): the CUDA driver, torch's allocator and compute-sanitizer's
    injection library read it with getenv when CUDA starts, inside the student's call, and
    /proc/self/environ shows the initial block anyway (docs/SECURITY.md)."""
    initial = dict(os.environ)
    os.environ.clear()          # unsetenv for each
    os.environ.update({k: initial[k] for k in ENV_KEPT if k in initial})
    if mode == "cuda":
        for key, value in initial.items():
            if key not in os.environ:
                os.putenv(key, value)


def _patch_interpreter_index() -> None:
    """Let `range(0, N, BLOCK_N)` run under older interpreters with NumPy >= 2.5.

    Triton's interpreter (3.6, for one) turns a scalar argument into a one-element array and
    converts it with int(array), which NumPy 2.5 refuses for arrays that are not 0-d. Later
    Triton releases squeeze first; this does the same, for the kernel's loop bounds only."""
    try:
        import numpy as np
        import triton.runtime.interpreter as interpreter
    except ImportError:
        return
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None:
        return

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    interpreter._patch_lang_tensor = patch_lang_tensor


class Worker:
    def __init__(self, conn, cfg: dict, seccomp_level: str):
        self.conn = conn
        self.cfg = cfg
        self.seccomp = seccomp_level
        self.walled = seccomp_level.startswith("processes")
        self.module = None
        self.capture_fd = cfg["capture_fd"]

    def serve(self) -> None:
        """Answer each request with one message carrying its tag (grader.sandbox.launcher: the
        grader then asks for a ping, whose answer must be the very next message)."""
        release = None   # after a reply: what goes back to the device once the ping is answered
        while True:
            tag = ""
            try:
                tag, parts = framing.receive(self.conn)
                msg, parts = codec.decode(parts, build=call_inputs.build_marker), None   # no 2nd copy
            except EOFError:
                return
            except Exception as e:  # noqa: BLE001 - building the inputs failed: the grader's fault
                # what was built before the failure is dropped, so the next call's inputs are
                # its own (a stale tensor first shifted every recorded input by one: a long
                # decode's K that found the GPU full made its later replays fail)
                call_inputs.forget_inputs()
                _release_gpu_memory()
                framing.send(self.conn, {"ok": False, "kind": "grader_error", "type": type(e).__name__,
                                       "message": f"the worker could not build the inputs: {e}",
                                       "traceback": traceback.format_exc()[-2000:]},
                           markers=False, tag=tag)
                continue
            op = msg.get("op")
            if op == "exit":
                if self.cfg["mode"] == "cuda":   # a tool around it (compute-sanitizer, ncu)
                    return                       # reports from the process's own exit
                # the CPU modes skip the interpreter's teardown: with torch loaded, a second of CPU
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(0)
            if op == "ping":   # the loop runs: the sandbox is set up, no student code has run
                reply = {"ok": True, "seccomp": self.seccomp}
            elif op == "replay":   # a replay worker (grader.worker.replay): no student call
                reply = self.replay(msg)
            else:
                reply = self.load() if op == "load" else self.call(msg)
            try:
                framing.send(self.conn, reply, markers=False, tag=tag)
            except codec.CodecError as e:  # the student returned something that cannot cross
                framing.send(self.conn, {"ok": False, "kind": "bad_return", "type": "TypeError",
                                       "message": str(e), "traceback": ""}, markers=False, tag=tag)
            except (OSError, ValueError):   # the pipe is gone: the trusted side stopped us
                return
            if op == "ping" and release is not None:
                # the call's inputs (its `msg`, gone now) and what its kernels allocated go back
                # to the device now, not at the next call: the grade's other processes share it;
                # after the ping that follows the reply, which the grader waits for. A full
                # collection (65 ms with torch loaded) only after a replay, whose steps are the
                # grader's; a call's tensors go when their last reference does
                _release_gpu_memory(collect=release)
                release = None
            elif op == "replay" or (op == "call" and self.cfg["mode"] == "cuda"
                                    and not checksum.timed_request(msg.get("opts"))):
                release = op == "replay"

    # ------------------------------------------------------------------------------ load

    def load(self) -> dict:
        path = self.cfg["path"]
        if not os.path.exists(path):
            return {"ok": False, "kind": "not_submitted", "type": "FileNotFoundError",
                    "message": f"{os.path.basename(path)} is not in the submission folder",
                    "traceback": ""}
        name = self.cfg["exercise"]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # so `from flash_triton import flash_fwd` finds this copy
        with captured(self.capture_fd):
            try:
                spec.loader.exec_module(module)
            except BaseException as e:  # noqa: BLE001 - SystemExit at import is a student error too
                sys.modules.pop(name, None)
                return failure(e, at="import", student_file=path, walled=self.walled)
        self.module = module
        return {"ok": True}

    # ------------------------------------------------------------------------------ replay

    def replay(self, msg: dict) -> dict:
        """Run a gated call's program again (grader.worker.replay), on inputs built from the
        same markers, with the probes `opts` asks for (bounds, NaN-filled empties)."""
        opts = msg.get("opts", {})
        with captured(self.capture_fd), probes.around_call(opts, [], {}) as extras:
            try:
                module = replay.module_named(self.module, msg.get("module"))
                refill = opts.get("refill")   # a timed call: its argument as it was refilled
                if refill:
                    checksum.refill(msg["args"][int(refill["arg"])], int(refill["seed"]),
                                    float(refill["std"]))
                value = replay.run(module, msg["program"], call_inputs.built_inputs(),
                                   self.cfg["mode"], check=self.cfg["mode"] != "interp",
                                   execute=self.cfg["mode"] != "cpu", summed=opts.get("summed"))
            except replay.FrontEndUnavailable as e:
                return {"ok": False, "kind": "grader_error", "type": "FrontEndUnavailable",
                        "message": f"Triton's front end cannot be run here: {e}", "traceback": ""}
            except BaseException as e:  # noqa: BLE001
                return failure(e, at="replay", student_file=self.cfg["path"])
        if isinstance(value, dict) and "out_of_bounds" in extras:
            # the replay's own record of every lane (grader.worker.bounds), which the trusted
            # side judges bounds on: made here, where no host code of the student's runs
            value["bounds"] = {k: extras[k] for k in ("out_of_bounds", "allocations") if k in extras}
        return {"ok": True, "value": value, "extras": extras}

    # ------------------------------------------------------------------------------ call

    def call(self, msg: dict) -> dict:
        fn_name = msg["fn"]
        fn = getattr(self.module, fn_name, None)
        if fn is None or not callable(fn):
            return {"ok": False, "kind": "exception", "type": "AttributeError",
                    "message": f"{self.cfg['exercise']}.py has no function {fn_name}()",
                    "traceback": ""}
        args, kwargs, opts = msg.get("args", []), msg.get("kwargs", {}), msg.get("opts", {})
        with captured(self.capture_fd):
            with probes.around_call(opts, args, kwargs) as extras:
                t0 = time.perf_counter()
                try:
                    value = probes.run(fn, args, kwargs, opts)
                except BaseException as e:  # noqa: BLE001
                    return failure(e, at=fn_name, student_file=self.cfg["path"], walled=self.walled)
                extras["worker_s"] = time.perf_counter() - t0
        return {"ok": True, "value": value, "extras": extras}


def _release_gpu_memory(collect: bool = True) -> None:
    """What the last replay or untimed CUDA call allocated goes back to the device once the
    answer is sent (the caching allocator would keep it): a replay worker lives for the whole
    run and replays calls of every size (on the H200 a replay of a long decode kept its inputs'
    memory and the next perf check's inputs found the GPU full), and the grade's other
    processes share the GPU. `collect`: a full garbage collection first (65 ms with torch)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        if collect:
            gc.collect()
        torch.cuda.empty_cache()


@contextlib.contextmanager
def captured(capture_fd: int):
    """Send fd 1 and 2 (Python and C-level prints) to the capture file while the block runs
    (they point there anyway; this undoes a redirection the student made outside a call)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = os.dup(1), os.dup(2)
    fd = os.dup(capture_fd)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)
