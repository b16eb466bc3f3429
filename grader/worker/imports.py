"""The import rule of exercise code: what a lesson file may import, and what it may not.

Installed by the worker before the submission is imported. An import made by code of an
exercise file (a frame whose code was compiled from a file in the submission folder) may name
the packages the lab installs for students (PACKAGES), another exercise file (bench_attn
imports flash_triton), or any module of the standard library except those of REFUSED: what the
sandbox refuses anyway (threads, processes, signals, the network, foreign code) and the
interpreter's own back doors (frames, the collector, dynamic import and code). An import made
by library code (numpy, torch, triton, the standard library, reached from an exercise file or
not) is never restricted. A refused import raises ImportError that says why in one line; the
worker reports it with the file and line of the import.

Two hooks, because an `import` of a module already in sys.modules never reaches sys.meta_path:
  - builtins.__import__ (every import statement, cached modules included): the importer is the
    frame that called it;
  - a sys.meta_path finder (importlib.import_module and other routes to a module not yet
    loaded): the importer is the first frame past importlib's own.

This is friction for honest mistakes (`import threading` says at once that the grader runs
without threads), not a wall: code that reaches a module another way (sys.modules, a code
object compiled under a library's file name) gets it. The wall is the kernel's seccomp filter
(grader/worker/seccomp.py): whatever is imported, no process, exec or thread can start.
"""

from __future__ import annotations

import builtins
import importlib
import os
import sys

# what the lab installs for students (requirements.txt), beside the standard library
PACKAGES = frozenset({"numpy", "scipy", "torch", "triton", "matplotlib"})
# modules of the standard library an exercise file may not import, with the reason the message
# gives; a dotted name refuses that module and its submodules only
REFUSED = {
    **dict.fromkeys(("threading", "_thread", "concurrent", "asyncio"),
                    "the grader runs your code without threads"),
    **dict.fromkeys(("subprocess", "_posixsubprocess", "multiprocessing", "pty", "webbrowser"),
                    "the grader runs your code without other processes"),
    **dict.fromkeys(("socket", "_socket", "ssl", "select", "selectors", "http", "urllib",
                     "ftplib", "smtplib", "xmlrpc", "socketserver"),
                    "the grader runs your code without the network or file descriptors"),
    **dict.fromkeys(("signal", "faulthandler", "resource", "fcntl", "termios", "tty"),
                    "the grader runs your code without signals or process limits"),
    **dict.fromkeys(("ctypes", "_ctypes", "mmap", "posix", "_posixshmem"),
                    "foreign code and raw memory are not available"),
    **dict.fromkeys(("gc", "inspect", "builtins", "importlib", "imp", "runpy", "pkgutil",
                     "zipimport", "pickle", "_pickle", "marshal", "code", "codeop", "pdb", "bdb",
                     "trace", "logging.handlers", "logging.config"),
                    "the interpreter's internals are not available to exercise code"),
}
IMPORTLIB = os.path.dirname(importlib.__file__)   # import_module and the rest of importlib


def refusal(name: str, exercises=frozenset()) -> str | None:
    """Why an exercise file may not import `name` (None: it may)."""
    parts = name.split(".")
    top = parts[0]
    if top in PACKAGES or top in exercises:
        return None
    for i in range(len(parts), 0, -1):
        why = REFUSED.get(".".join(parts[:i]))
        if why:
            return why
    if top in sys.stdlib_module_names and (top == "__future__" or not top.startswith("_")):
        return None
    return (f"an exercise file may import {', '.join(sorted(PACKAGES))}, the standard library "
            f"and the other exercise files; {top} is none of them")


class AllowList:
    """The two hooks for the exercise files in `submission_dir`."""

    def __init__(self, submission_dir: str):
        # as the worker names the files it imports, and as the kernel resolves that name
        self.folders = tuple({os.path.join(submission_dir, ""),
                              os.path.join(os.path.realpath(submission_dir), "")})
        self.exercises = frozenset(
            name[:-3] for name in os.listdir(submission_dir) if name.endswith(".py"))
        self.original_import = builtins.__import__

    def install(self) -> None:
        builtins.__import__ = self.checked_import
        sys.meta_path.insert(0, self)

    # --------------------------------------------------------------------- the two hooks

    def checked_import(self, name, globals=None, locals=None, fromlist=(), level=0):
        # An import statement passes None or a tuple as fromlist. A library's C code importing
        # through PyImport_Import passes an empty list, and the Python frame below it is the
        # one that called the library (perhaps an exercise file's): its import is the library's.
        if level == 0 and not isinstance(fromlist, list):
            self.check(name, sys._getframe(1))
        return self.original_import(name, globals, locals, fromlist, level)

    def find_spec(self, name, path=None, target=None):
        frame = sys._getframe(1)
        while frame is not None and (frame.f_code.co_filename.startswith("<frozen importlib")
                                     or os.path.dirname(frame.f_code.co_filename) == IMPORTLIB):
            frame = frame.f_back
        if frame is None or frame.f_code is not AllowList.checked_import.__code__:
            self.check(name, frame)   # not through builtins.__import__, which judged the rest
        return None   # allowed: the other finders find it

    # --------------------------------------------------------------------- the rule

    def check(self, name: str, frame) -> None:
        if frame is None or not self.from_exercise(frame.f_code.co_filename):
            return
        why = refusal(name, self.exercises)
        if why:
            raise ImportError(f"import {name} is refused: {why} (an import for a self-check of "
                              f"your own can go under `if __name__ == \"__main__\":`, which the "
                              f"grader does not run)", name=name)

    def from_exercise(self, filename: str) -> bool:
        return filename.startswith(self.folders)
