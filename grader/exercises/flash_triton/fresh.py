"""flash_fwd(q, k, v)'s fresh inputs for provenance's second replay (grader.judge.fresh): q, k, v
with their values moved (same shapes and dtype), and the float64 attention of both."""

from __future__ import annotations

from grader.judge import reference
from grader.judge.fresh import Fresh, redrawn, tensors, values


def fresh(fn, args, kwargs, rng):
    if fn != "flash_fwd" or not tensors(args, 3):
        return None
    q, k, v = (redrawn(a, rng) for a in args[:3])
    return Fresh([q, k, v, *args[3:]], kwargs,
                 [reference.attention(values(q), values(k), values(v))],
                 [reference.attention(*(values(a) for a in args[:3]))])
