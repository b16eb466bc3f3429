"""Attack (issue 53): the answer is sent by the student's code, not by the worker's serving loop.

Each call computes its answer in two passes (max, then the sum: what `online_max_sum` must not
do), writes a reply of its own onto the worker's socket through the worker's own codec, with
none of the probes' records in it, then leaves with os._exit(0) before the loop can send the
real reply. The socket is found in /proc/self/fd, the request's tag in the serving loop's frame.
Before: the first well-formed reply was the answer, and the dead worker was started again for the
next call (full marks, the one-pass check included, since its records were missing). Now the
grader's ping after the reply finds the worker gone: every call crashed, 0."""

import math
import os
import sys

import numpy as np


def _sockets():
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.fstat(int(name)).st_mode & 0o170000 == 0o140000:
                found.append(int(name))
        except OSError:
            pass
    return found


def _tag():
    frame = sys._getframe()
    while frame is not None:
        if isinstance(frame.f_locals.get("tag"), str):
            return frame.f_locals["tag"]
        frame = frame.f_back
    return ""


def _answer(value):
    """Send `value` as the call's reply, with empty extras, and leave."""
    framing = sys.modules["grader.wire.framing"]                 # the worker's own, already loaded
    connection = sys.modules["multiprocessing.connection"].Connection
    for fd in _sockets():
        try:
            conn = connection(os.dup(fd))
            try:
                framing.send(conn, {"ok": True, "value": value, "extras": {}}, tag=_tag())
            except TypeError:                                    # a codec without tags
                framing.send(conn, {"ok": True, "value": value, "extras": {}})
        except OSError:
            pass
    os._exit(0)


def _max_sum(values):
    m = max(values, default=-math.inf)                             # pass 1
    if m == -math.inf:
        return -math.inf, 0.0
    return m, sum(math.exp(v - m) for v in values)                 # pass 2


def softmax_safe(x):
    xw = np.asarray(x).astype(np.promote_types(np.asarray(x).dtype, np.float32))
    e = np.exp(xw - xw.max())
    _answer((e / e.sum()).astype(np.asarray(x).dtype))


def online_max_sum(x):
    _answer(_max_sum(np.asarray(x, dtype=np.float64).tolist()))


def softmax_online(x):
    x = np.asarray(x)
    m, l = _max_sum(x.astype(np.float64).tolist())
    _answer((np.exp(x.astype(np.promote_types(x.dtype, np.float32)) - m) / l).astype(x.dtype))


def merge(a, b):
    (ma, la), (mb, lb) = map(float, a), map(float, b)
    m = max(ma, mb)
    _answer((-math.inf, 0.0) if m == -math.inf else (m, la * math.exp(ma - m) + lb * math.exp(mb - m)))
