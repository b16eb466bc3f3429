"""The static audit's rules as data (grader.judge.source.audit walks the source with them): modules,
calls and attributes a submission may not use, and the few of `os` and `sys` it may."""

from __future__ import annotations

import re

# modules (and their submodules) a submission may not import
BANNED_MODULES = {
    "threading": "threads", "_thread": "threads", "concurrent": "threads or processes",
    "asyncio": "threads or subprocesses", "multiprocessing": "other processes",
    "subprocess": "other processes", "_posixsubprocess": "other processes", "pty": "other processes",
    "ctypes": "foreign code", "_ctypes": "foreign code", "cffi": "foreign code",
    "mmap": "raw memory", "io": "file access", "_io": "file access", "pathlib": "file access",
    "shutil": "file access", "tempfile": "file access", "fileinput": "file access",
    "socket": "the network", "signal": "signals", "fcntl": "file descriptors",
    "resource": "process limits", "select": "file descriptors", "selectors": "file descriptors",
    "inspect": "frame inspection", "gc": "reaching other objects through the collector",
    "importlib": "dynamic import", "imp": "dynamic import", "runpy": "dynamic import",
    "pkgutil": "dynamic import", "zipimport": "dynamic import", "pickle": "dynamic code",
    "marshal": "dynamic code", "code": "dynamic code", "codeop": "dynamic code",
    "types": "building code objects", "builtins": "the interpreter's builtins",
    "faulthandler": "signals", "posix": "os internals", "sys._getframe": "frame inspection",
    "grader": "the grader", "hidden_tests": "the grader's tests", "tests": "the grader's tests",
    "torch.multiprocessing": "other processes", "torch.utils.cpp_extension": "foreign code",
    "torch._C": "torch internals", "torch.utils._python_dispatch": "torch internals",
    "torch.library": "torch internals", "torch.overrides": "torch internals",
    "triton.runtime.interpreter": "the interpreter's internals", "triton._C": "Triton internals",
    "numpy.ctypeslib": "foreign code", "torch.ops.load_library": "foreign code",
    "torch.compile": "code compiled by PyTorch", "torch.jit": "code compiled by PyTorch",
    "torch.fx": "code compiled by PyTorch", "torch.export": "code compiled by PyTorch",
    "torch.cuda.jiterator": "code compiled by PyTorch", "triton.compile": "Triton internals",
}
NUMPY_FOR_TRITON = {"numpy": "NumPy in a Triton exercise (the kernel must compute the answer)",
                    "scipy": "SciPy in a Triton exercise (the kernel must compute the answer)"}

BANNED_CALLS = {
    "exec": "dynamic code", "eval": "dynamic code", "compile": "dynamic code",
    "__import__": "dynamic import", "breakpoint": "the debugger", "globals": "frame inspection",
    "vars": "frame inspection", "memoryview": "raw memory",
}
# attributes that reach frames, code, globals or the interpreter's insides
BANNED_ATTRS = {
    "f_back", "f_locals", "f_globals", "f_builtins", "f_code", "f_trace", "tb_frame", "tb_next",
    "gi_frame", "cr_frame", "ag_frame", "gi_code", "__globals__", "__code__", "__closure__",
    "__builtins__", "__subclasses__", "__import__", "__self__", "__dict__", "__loader__",
    "__spec__", "__traceback__", "_getframe", "settrace", "setprofile", "__reduce__",
    "__reduce_ex__", "__getattribute__",
}
# in the Triton exercises: ways to take a tensor's values out of torch
TENSOR_ESCAPES = {
    "numpy", "tolist", "__array__", "__array_interface__", "__array_struct__",
    "__cuda_array_interface__", "__dlpack__", "from_dlpack", "to_dlpack", "data_ptr",
    "untyped_storage", "storage", "_typed_storage", "frombuffer", "from_file",
}
OS_ALLOWED = {"environ", "getenv", "path", "cpu_count", "sep", "linesep", "name", "pathsep",
              "getpid", "devnull", "curdir"}
SYS_ALLOWED = {"exit", "argv", "version", "version_info", "float_info", "maxsize", "stdout",
               "stderr", "platform", "byteorder", "path", "executable", "float_repr_style",
               "int_info", "hexversion", "implementation"}
READ_MODES = re.compile(r"[r+]")
