"""softmax(x) for provenance's second replay (grader.judge.evidence.fresh): x with its values moved."""

from __future__ import annotations

from grader.judge.answers import reference
from grader.judge.evidence.fresh import moved


def fresh(fn, args, kwargs, rng):
    if fn != "softmax":
        return None
    return moved(args, kwargs, rng, 1, lambda x, *rest: [reference.softmax(x, axis=-1)])
