"""softmax(x, BLOCK)'s fresh inputs for provenance's second replay (grader.judge.fresh): x with its values
moved (same shape, dtype and padding), and the float64 softmax of both."""

from __future__ import annotations

from grader.judge import reference
from grader.judge.fresh import Fresh, redrawn, tensors, values


def fresh(fn, args, kwargs, rng):
    if fn != "softmax" or not tensors(args, 1):
        return None
    x = redrawn(args[0], rng)
    return Fresh([x, *args[1:]], kwargs, [reference.softmax(values(x), axis=-1)],
                 [reference.softmax(values(args[0]), axis=-1)])
