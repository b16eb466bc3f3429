"""Cheat (issue 53, "read logs are built in the student's process"): online_max_sum in two
vectorised passes, and the recorder module's `collect` (which the worker's probes call after
the call) replaced through vars(sys.modules[...]) by one that hands back a log of its own: one
pass, with `passes` a bool (True == 1 to Python). The grader reads the log as evidence of
nothing: one_pass is advice with no points, and a log that is not what the recorder writes is
"the evidence was missing", never a pass."""
import sys

import numpy as np


def _forge():
    mod = sys.modules.get("grader.worker.recorders")
    if mod is not None:
        vars(mod)["collect"] = lambda: [{"n": 0, "passes": True, "whole_reads": 0,
                                         "second_pass": "", "ranges": []}]


def online_max_sum(x):
    _forge()
    if len(x) == 0:
        return float("-inf"), 0.0
    m = float(x.max())                                            # pass 1 over x itself
    return m, float(np.exp(np.asarray(x - m, dtype=np.float64)).sum())  # pass 2


def softmax_safe(x):
    raise NotImplementedError("not part of this cheat")


def softmax_online(x):
    raise NotImplementedError("not part of this cheat")


def merge(a, b):
    raise NotImplementedError("not part of this cheat")
