"""Triton's front end's verdicts on the kernels a replay launches (grader.judge.evidence.provenance):
a (filtered file's digest, kernel, signature) it compiled once need not be compiled again, in
this process or, where student code runs as a user of its own, in a later grade: each verdict is
an empty file named by the key's digest, under the option cache (GRADER_CACHE; default
~/.cache/lab-grader)
/frontend-<triton version>, written only by the trusted grader once the front end has compiled
the kernel. A grade whose kernels were all compiled before starts no compile worker (a process
that imports torch and Triton: seconds of CPU, most of a small grade's cost).
"""

from __future__ import annotations

import functools
from pathlib import Path

# (filtered file's digest, kernel, signature) that Triton's front end compiled, in this process
COMPILED: set = set()


def _verdicts_folder(sub) -> Path | None:
    """Where the front end's verdicts outlive this process: GRADER_CACHE (or ~/.cache/lab-grader),
    /frontend-<triton version>. Only where student code runs as a user of its own (os and user
    isolation levels), so no submission can write a verdict there; GRADER_CACHE=0: never."""
    from grader import options

    wanted = options.current().cache
    level = getattr(sub, "level", None)
    if wanted == "0" or not getattr(level, "as_student", False):
        return None
    version = _triton_version()
    if version is None:
        return None
    base = Path(wanted) if wanted else Path.home() / ".cache" / "lab-grader"
    return base / f"frontend-{version}"


@functools.lru_cache(maxsize=1)
def _triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return str(getattr(triton, "__version__", "unknown"))


def _key_name(key: tuple) -> str:
    import hashlib

    return hashlib.sha256(repr(key).encode()).hexdigest()


def compiled_before(key: tuple, sub) -> bool:
    """Whether Triton's front end already compiled this (filtered file, kernel, signature): in
    this process, or in an earlier grade (a file named by the key's digest, written only by the
    trusted grader after the front end compiled it, in a folder no student user can write)."""
    if key in COMPILED:
        return True
    folder = _verdicts_folder(sub)
    if folder is not None and (folder / _key_name(key)).is_file():
        COMPILED.add(key)
        return True
    return False


def remember_compiled(key: tuple, sub) -> None:
    COMPILED.add(key)
    folder = _verdicts_folder(sub)
    if folder is None:
        return
    try:   # one empty file per verdict: concurrent graders never have to merge anything
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        (folder / _key_name(key)).touch()
    except OSError:
        pass
