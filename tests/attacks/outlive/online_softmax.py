"""A double-forked setsid grandchild that outlives the grade and rewrites the report."""
import os
import sys

FAKE = '{"score": 999, "max_score": 999, "tests": [], "output": "forged later"}'
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in range(3, 256):   # let go of the worker's pipes
            try:
                os.close(fd)
            except OSError:
                pass
        script = f"for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.5; echo '{FAKE}' > __REPORT__; done"
        os.execv("/bin/sh", ["sh", "-c", script, "LAB-ATTACK-MARKER"])
    os._exit(0)
os.wait()


def softmax_safe(x):
    raise NotImplementedError


online_max_sum = softmax_online = merge = softmax_safe
