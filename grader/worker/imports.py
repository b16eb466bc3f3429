"""The import allow-list of exercise code: what a lesson file may import, and nothing else.

Installed by the worker before the submission is imported. An import made by code of an
exercise file (a frame whose code was compiled from a file in the submission folder) may name
only a module of ALLOWED (and its submodules) or another exercise file (bench_attn imports
flash_triton); an import made by library code (numpy, torch, triton, the standard library,
reached from an exercise file or not) is never restricted. A refused import raises ImportError
naming the allow-list.

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

# numpy, torch and triton are the lesson's libraries. The standard library modules are those the
# lesson's files and the solutions import (math, time, json, statistics; os for
# os.environ.get("TRITON_INTERPRET"), sys for sys.exit under __main__, tracemalloc in
# tiled_attention's self-check) and the plain-language helpers a student reasonably reaches for.
# Absent on purpose: threading, subprocess, multiprocessing, concurrent, ctypes, socket, signal,
# importlib, pickle, logging (a QueueListener runs a thread): none is needed by the lesson.
ALLOWED = frozenset({
    "numpy", "torch", "triton",
    "math", "time", "json", "statistics", "os", "sys", "tracemalloc",
    "functools", "itertools", "typing", "dataclasses", "collections", "contextlib", "abc", "enum",
    "numbers", "operator", "__future__", "warnings", "random", "copy", "types", "gc", "timeit",
})
IMPORTLIB = os.path.dirname(importlib.__file__)   # import_module and the rest of importlib


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
        top = name.partition(".")[0]
        if top in ALLOWED or top in self.exercises:
            return
        raise ImportError(
            f"import {name}: the grader runs exercise files with the modules the lesson uses "
            f"and nothing else: {', '.join(sorted(ALLOWED))}, and the exercise files "
            f"({', '.join(sorted(self.exercises))}). An import for a self-check of your own can go inside "
            f"`if __name__ == \"__main__\":`, which the grader does not run.", name=name)

    def from_exercise(self, filename: str) -> bool:
        return filename.startswith(self.folders)
