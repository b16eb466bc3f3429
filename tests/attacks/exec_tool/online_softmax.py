"""Attack: exec a tool. `os.posix_spawn` starts a fresh Python (no import allow-list, no probe
of the worker) that computes the answer and writes it to a pipe. Full marks if exec works; the
worker's seccomp filter refuses execve (and the clone that posix_spawn makes first), so the call
raises PermissionError: 0."""

import math
import sys

import numpy as np

# the lesson's own answers, as a string: run where the channel runs (a thread, a child, a tool)
_IMPL_SRC = """
import math
import numpy as np


def _safe(x):
    xw = x.astype(np.promote_types(x.dtype, np.float32))
    e = np.exp(xw - xw.max())
    return (e / e.sum()).astype(x.dtype)


def _max_sum(values):
    m, l = -math.inf, 0.0
    for xi in values.tolist():
        m_new = max(m, xi)
        if m_new != -math.inf:
            l, m = l * math.exp(m - m_new) + math.exp(xi - m_new), m_new
    return m, l


def _online(x):
    m, l = _max_sum(x.astype(np.float64))
    return (np.exp(x.astype(np.promote_types(x.dtype, np.float32)) - m) / l).astype(x.dtype)


def _merge(a, b):
    (ma, la), (mb, lb) = map(float, a), map(float, b)
    m = max(ma, mb)
    return (-math.inf, 0.0) if m == -math.inf else (m, la * math.exp(ma - m) + lb * math.exp(mb - m))


_IMPL = {"softmax_safe": _safe, "online_max_sum": _max_sum, "softmax_online": _online,
         "merge": _merge}
"""


def _imp(name):
    """`import name`, compiled under NumPy's file name: the worker's import allow-list judges
    an import by the file of the code that makes it, so this one reads as the library's."""
    scope = {}
    exec(compile(f"import {name}\nmodule = {name}", np.__file__, "exec"), scope)
    return scope["module"]

import os

_CHILD = _IMPL_SRC + """
import pickle, sys
name, args = pickle.load(sys.stdin.buffer)
sys.stdout.buffer.write(pickle.dumps(_IMPL[name](*args)))
"""


def _remote(name, *args):
    pickle = _imp("pickle")
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    pid = os.posix_spawn(sys.executable, [sys.executable, "-I", "-c", _CHILD], {},
                         file_actions=[(os.POSIX_SPAWN_DUP2, stdin_r, 0),
                                       (os.POSIX_SPAWN_DUP2, stdout_w, 1)])
    os.close(stdin_r)
    os.close(stdout_w)
    with os.fdopen(stdin_w, "wb") as f:
        f.write(pickle.dumps((name, args)))
    with os.fdopen(stdout_r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return pickle.loads(data)


def softmax_safe(x):
    return _remote("softmax_safe", np.asarray(x))


def online_max_sum(x):
    return _remote("online_max_sum", np.asarray(x, dtype=np.float64))   # x read once, in order


def softmax_online(x):
    return _remote("softmax_online", np.asarray(x))


def merge(a, b):
    return _remote("merge", tuple(map(float, a)), tuple(map(float, b)))
