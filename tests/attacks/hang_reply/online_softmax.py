"""During a call, write a reply header that promises three parts straight onto the pipe, send
one, and go quiet: a receive without a deadline waits forever."""
import json
import os
import sys
import time

import numpy as np


def _library_import(name: str):
    """`import name`, compiled under NumPy's file name: the worker's import allow-list judges an
    import by the file of the code that makes it (a wall for honest mistakes, not an attacker's)."""
    scope = {}
    exec(compile(f"import {name}\nmodule = {name}", np.__file__, "exec"), scope)
    return scope["module"]


Connection = _library_import("multiprocessing.connection").Connection


def _pipes():
    fds = []
    try:
        cfg = json.loads(sys.argv[1])
        fds.append(cfg["conn_fd"])
    except Exception:
        pass
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                fds.append(int(fd))
        except OSError:
            pass
    return fds


def softmax_safe(x):
    for fd in _pipes():
        try:
            conn = Connection(os.dup(fd))
            conn.send_bytes(b'{"parts": 3}')
            conn.send_bytes(b'{"ok": true, "value": 1}')
            os.write(fd, b"\x00\x00\x10\x00partial")   # a frame that promises 4 KiB, 7 bytes sent
        except OSError:
            pass
    time.sleep(3600)


online_max_sum = softmax_online = merge = softmax_safe
