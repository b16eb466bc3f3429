"""What of the host a worker gets, by allow-list: the paths bound read-only into its root at the
os level (`read_only_paths`), its whole environment (`environment`), and the interpreter it runs
(`interpreter`). Anything not listed here a worker does not see.
"""

from __future__ import annotations

import os
import sys

ENV_KEEP = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH",
            "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "LD_LIBRARY_PATH",
            "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TRITON_INTERPRET", "TRITON_PTXAS_PATH",
            "TRITON_LIBCUDA_PATH", "PYTORCH_NO_CUDA_MEMORY_CACHING", "GRADER_TIMEOUT_SCALE")


def interpreter() -> str:
    """sys.executable with its folder's symlinks resolved and its file name kept: a virtualenv
    reached through a symlink (repo/.venv -> /elsewhere/venv) is bound at its real place, and its
    python still finds the pyvenv.cfg beside it (the fully resolved file would be the base
    interpreter, without the venv's packages)."""
    return os.path.join(os.path.realpath(os.path.dirname(sys.executable)), os.path.basename(sys.executable))


def read_only_paths(repo: str, exclude: list[str]) -> list[str]:
    """Host paths bound read-only at the same place: what Python and its packages need.

    Never the repo (except the interpreter's own prefix if it lives there, e.g. repo/.venv) or
    anything in `exclude` (the submission, reports), nor a folder that contains one of them."""
    repo = os.path.realpath(repo)
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    wanted = ["/usr", "/etc", "/opt", *prefixes]
    wanted += [p for p in sys.path if p and os.path.isdir(p)]
    for exe in (sys.executable, os.path.realpath(sys.executable)):
        wanted.append(os.path.dirname(exe))
    out: list[str] = []
    for p in wanted:
        p = os.path.realpath(p)
        if not os.path.isdir(p) or p == "/":
            continue
        if _inside(repo, p) or any(_inside(x, p) or _inside(p, x) for x in exclude):
            continue  # p is the repo or holds it, or touches a protected path
        if _inside(p, repo) and not any(_inside(p, pre) for pre in prefixes):
            continue  # inside the repo, and not the interpreter's own prefix
        if any(_inside(p, q) for q in out):
            continue
        out = [q for q in out if not _inside(q, p)] + [p]
    return sorted(out)


def _inside(path: str, folder: str) -> bool:
    """path is folder or below it."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def environment(mode: str, home: str, tmp: str = "/tmp") -> dict:
    """The worker's whole environment: an allow-list. `tmp`: its TMPDIR (its scratch where /tmp
    is the machine's own, shared)."""
    env = {k: os.environ[k] for k in ENV_KEEP if k in os.environ}
    env.update(PATH="/usr/local/bin:/usr/bin:/bin", HOME=home, TMPDIR=tmp, USER="student",
               LOGNAME="student", LANG=env.get("LANG", "C.UTF-8"), PYTHONDONTWRITEBYTECODE="1",
               PYTHONNOUSERSITE="1", TRITON_CACHE_DIR=os.path.join(home, ".triton"),
               MPLCONFIGDIR=os.path.join(home, ".matplotlib"), XDG_CACHE_HOME=os.path.join(home, ".cache"))
    bindir = os.path.dirname(interpreter())
    env["PATH"] = f"{bindir}:{env['PATH']}"
    if mode == "interp":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    if mode in ("cpu", "interp"):
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env
