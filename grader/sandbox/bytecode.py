"""Python bytecode of the libraries the workers import, built once per grading run where the
machine ships none.

Some machines install torch without .pyc files and forbid writing them (the course's H200:
PYTHONDONTWRITEBYTECODE=1 and no __pycache__ in site-packages). Each worker then compiles
torch, sympy and numpy from source as it imports them: `import torch` took 4.3 to 5.9 s there
instead of 1.2 s, and the first torch.profiler session of a gated worker (it imports torch.fx)
4.2 to 5.8 s instead of 0.8 to 1.2 s. A grade starts dozens of workers.

Where torch's own `__init__` has no bytecode (`needed`), a grading run (`for_run`, opened by
grader.run.grade and handed to its parallel processes) starts one trusted process, as soon as
it opens, that imports what a worker imports (torch, numpy, triton, a CPU profiler session)
with `python -I -X pycache_prefix=<folder>`: Python writes every module's bytecode there, each
file atomically. Workers read the folder through `-X pycache_prefix`; one that starts before
the build is done finds part of it and compiles the rest in memory, as before.

No worker can write it: it is used only at the isolation levels where workers run under a uid
of their own (`level.as_student`), the folder and its files are the grader's (0755 and 0644),
and at the `os` level it is bound read-only at confine.INSIDE_PYCACHE. A worker's bytecode
could otherwise reach the replay workers, which run no Python of the student's. Python checks
each .pyc against its source's size and modification time: a stale one is compiled again.
The grader's own processes keep importing from source; the folder is removed with the run.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

# what a worker imports before and during its calls (grader.worker.worker, tracing's profiler)
BUILD = """
import os
os.umask(0o022)   # the workers' uid reads what this writes
import numpy, torch, triton, triton.language
import triton.compiler.compiler, triton.runtime.jit
from torch.profiler import ProfilerActivity, profile
with profile(activities=[ProfilerActivity.CPU]):
    pass
"""

_runs: list[Path] = []          # the open runs' folders, innermost last


def needed() -> bool:
    """Whether workers would compile torch from source here: its `__init__` has no bytecode
    beside it (found without importing torch). The option bytecode (--bytecode,
    --no-bytecode) decides instead."""
    from grader import options

    wanted = options.current().bytecode
    if wanted is not None:
        return wanted
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return False
    return not os.path.exists(importlib.util.cache_from_source(spec.origin))


@contextlib.contextmanager
def for_run(folder: str | None = None, wanted: bool = True):
    """The bytecode folder of one grading run: `folder` when a grade that split the run across
    processes hands its own down (grader.parallel; "" when it has none), else (None) a new one
    when `wanted` and `needed`, its build started now and stopped, with the folder removed,
    when the run ends; None when there is none."""
    own = folder is None
    if folder == "" or (own and not (wanted and needed())):
        yield None
        return
    builder = None
    if own:
        path = Path(tempfile.mkdtemp(prefix="grader-bytecode-"))
        path.chmod(0o755)
        from grader.sandbox import isolation

        # the trusted builder; None when it cannot start (the workers compile from source then)
        builder = isolation.start_trusted(["-X", f"pycache_prefix={path}"], BUILD)
    else:
        path = Path(folder)
    _runs.append(path)
    try:
        yield path
    finally:
        _runs.remove(path)
        if own:
            if builder is not None and builder.poll() is None:
                builder.kill()
                builder.wait()
            shutil.rmtree(path, ignore_errors=True)


def current() -> str:
    """The innermost open run's folder ("" when none)."""
    return str(_runs[-1]) if _runs else ""


def folder_for(level) -> Path | None:
    """The host folder a worker at isolation `level` reads bytecode from, or None: no run's
    folder open, or a level where the worker runs under the grader's own uid (it could write
    the folder there)."""
    if not _runs or not getattr(level, "as_student", False):
        return None
    return _runs[-1]
