"""The worker's own walls (grader/worker/seccomp.py, grader/worker/imports.py), each tried in a
fresh Python so that nothing is installed in the test process: after the seccomp filter no
fork, exec, posix_spawn, multiprocessing, raw clone or (in the CPU modes) thread starts, while
the grader's own work (NumPy, torch on one thread, Triton's interpreter, tracemalloc) still
runs; the import allow-list refuses what an exercise file may not import, and only that."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import ROOT

TRIES = textwrap.dedent("""
    import ctypes, json, multiprocessing, os, subprocess, sys, threading
    os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    sys.path.insert(0, {root!r})
    from grader.worker import seccomp
    out = {{"level": seccomp.install(threads={threads})}}

    def fork():
        if os.fork() == 0:
            os._exit(0)

    def raw_clone():   # clone(SIGCHLD): fork by number, past any Python wrapper
        libc = ctypes.CDLL(None, use_errno=True)
        nr = {{"x86_64": 56, "aarch64": 220}}[os.uname().machine]
        if libc.syscall(nr, 17, 0, 0, 0, 0) == 0:
            os._exit(0)
        raise OSError(ctypes.get_errno(), "clone")

    def thread():
        t = threading.Thread(target=int)
        t.start()
        t.join()

    tries = {{"fork": fork, "subprocess": lambda: subprocess.run(["/bin/true"]),
             "posix_spawn": lambda: os.posix_spawn("/bin/true", ["true"], {{}}),
             "execv": lambda: os.execv("/bin/true", ["true"]), "raw_clone": raw_clone,
             "multiprocessing": lambda: multiprocessing.Process(target=int).start(),
             "thread": thread}}
    for name, attempt in tries.items():
        try:
            attempt()
            out[name] = "started"
        except (OSError, RuntimeError) as e:
            out[name] = type(e).__name__
    import tracemalloc
    import numpy as np
    tracemalloc.start()
    out["numpy"] = float((np.ones((64, 64)) @ np.ones((64, 64)))[0, 0])
    out["tracemalloc"] = tracemalloc.get_traced_memory()[1] > 0
    print(json.dumps(out))
""")


def _run(code: str, env: dict | None = None) -> dict:
    proc = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="no filter for this architecture")
@pytest.mark.parametrize("threads", [True, False])
def test_seccomp_denies_processes_and_threads(threads):
    out = _run(TRIES.format(root=str(ROOT), threads=threads))
    assert out.pop("level") == ("processes+threads" if threads else "processes")
    assert out.pop("numpy") == 64.0 and out.pop("tracemalloc") is True
    assert out.pop("thread") == ("RuntimeError" if threads else "started")
    assert out == dict.fromkeys(("fork", "subprocess", "posix_spawn", "execv", "raw_clone",
                                 "multiprocessing"), "PermissionError"), out


def test_seccomp_leaves_the_grader_work_running():
    """torch on one thread, autograd and a Triton kernel under the interpreter, after the filter."""
    pytest.importorskip("triton")
    code = textwrap.dedent(f"""
        import json, os, sys
        os.environ.update(OMP_NUM_THREADS="1", TRITON_INTERPRET="1")
        sys.path.insert(0, {str(ROOT)!r})
        import torch, triton, triton.language as tl
        torch.set_num_threads(1)
        from grader.worker import seccomp
        level = seccomp.install(threads=True)

        @triton.jit
        def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

        x = torch.randn(1000)
        y = torch.empty_like(x)
        double[(8,)](x, y, 1000, BLOCK=128)
        w = torch.randn(300, 300, requires_grad=True)
        (w @ w).softmax(-1).sum().backward()
        print(json.dumps({{"level": level, "triton": bool(torch.equal(y, x * 2)),
                          "autograd": list(w.grad.shape)}}))
    """)
    assert _run(code) == {"level": "processes+threads", "triton": True, "autograd": [300, 300]}


def test_seccomp_unknown_architecture_installs_nothing(monkeypatch):
    from grader.worker import seccomp

    monkeypatch.setattr(platform, "machine", lambda: "riscv64")
    assert seccomp.install(threads=True) == "unavailable: no filter for the riscv64 architecture"


def test_seccomp_program_checks_the_architecture_first():
    from grader.worker import seccomp

    for name, arch in seccomp.ARCHES.items():
        insns = seccomp.program(arch, threads=False)
        assert insns[0] == (seccomp.LD_ABS_W, 0, 0, seccomp.ARCH), name
        assert insns[1][0] == seccomp.JEQ and insns[1][3] == arch.audit, name
        assert insns[-3][3] == seccomp.SECCOMP_RET_ALLOW, name


def test_import_allow_list(tmp_path):
    """An exercise file may import the lab's packages (scipy too: the lesson names it), the
    standard library and the other exercise files; what the sandbox refuses anyway (threads,
    processes, foreign code), the interpreter's back doors and other packages are refused with
    the reason; the libraries it imports are not restricted."""
    (tmp_path / "flash_triton.py").write_text("X = 1\n")
    (tmp_path / "bench_attn.py").write_text(textwrap.dedent("""
        import json, math, os, sys, wave, heapq, pathlib
        import numpy
        from scipy.special import logsumexp
        from flash_triton import X
        refused = []
        for name in ("threading", "subprocess", "ctypes", "logging.handlers", "gc", "rich",
                     "_collections"):
            try:
                __import__(name)
            except ImportError as e:
                refused.append((name, str(e).startswith(f"import {name} is refused: ")))
        try:   # not through builtins.__import__: the sys.meta_path finder sees it
            sys.modules["importlib"].import_module("xmlrpc.client")
        except ImportError as e:
            refused.append(("xmlrpc.client", "without the network" in str(e)))
    """))
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(ROOT)!r})
        from grader.worker import imports
        imports.AllowList({str(tmp_path)!r}).install()
        sys.path.append({str(tmp_path)!r})
        import bench_attn
        import logging.handlers   # this file is not an exercise file: not restricted
        print(json.dumps(bench_attn.refused))
    """)
    assert _run(code) == [[name, True] for name in
                          ("threading", "subprocess", "ctypes", "logging.handlers", "gc", "rich",
                           "_collections", "xmlrpc.client")]


def test_environment_is_the_same_when_watched(tmp_path):
    """What a sanitized call adds to the worker's environment (compute-sanitizer's injection
    path, the uncached allocator) is not there for the exercise's code, and argv carries no
    configuration: a plain and a watched worker look the same from Python."""
    import tempfile

    from grader.sandbox.proxy import Submission

    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "online_softmax.py").write_text(
        "import os, sys\n\ndef softmax_safe(x):\n"
        "    return {'environ': sorted(os.environ.items()), 'argv': sys.argv}\n")
    seen = []
    for env in ({}, {"CUDA_INJECTION64_PATH": "/opt/sanitizer/libinject.so",
                     "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}):
        worker = Submission("online_softmax", sub, "cpu", Path(tempfile.mkdtemp(dir=tmp_path)) / "s",
                            env=env)
        try:
            seen.append(worker.softmax_safe([1.0]))
        finally:
            worker.close()
    plain, watched = seen
    assert watched["argv"] == ["-c"]
    keys = {k for k, _ in watched["environ"]}
    assert not keys & {"CUDA_INJECTION64_PATH", "PYTORCH_NO_CUDA_MEMORY_CACHING"}, keys
    if worker.level.name == "os":   # both see the scratch folder as /sandbox/work
        assert plain["environ"] == watched["environ"]
    else:   # HOME and TRITON_CACHE_DIR name each worker's own scratch folder
        assert [k for k, _ in plain["environ"]] == [k for k, _ in watched["environ"]]
