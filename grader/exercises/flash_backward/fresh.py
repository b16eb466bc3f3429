"""flash_backward's moved inputs for provenance's second replay (grader.judge.fresh): the
tensors with their values moved (same shapes and dtypes), and the float64 answers of both.
flash_bwd is given the o and L of its new q, k, v (o rounded to its dtype), as flash_fwd would
have made them, so a backward that recomputes them instead of reading them is still right."""

from __future__ import annotations

from grader.exercises.flash_backward.reference import backward_reference, forward_reference
from grader.judge.fresh import Fresh, redrawn, tensors, values
from grader.judge.inputs import round_to

POSITIONAL_CAUSAL = {"flash_fwd": 3, "flash_bwd": 6, "flash_attention": 3}
TENSORS = {"flash_fwd": 3, "flash_bwd": 6, "flash_attention": 4}   # flash_attention's 4th: g


def _causal(fn, args, kwargs) -> bool:
    at = POSITIONAL_CAUSAL[fn]
    return bool(kwargs.get("causal", args[at] if len(args) > at else False))


def fresh(fn, args, kwargs, rng):
    if fn not in TENSORS or not tensors(args, TENSORS[fn]):
        return None
    causal = _causal(fn, args, kwargs)
    rest = args[TENSORS[fn]:]
    q, k, v = (redrawn(a, rng) for a in args[:3])
    old = [values(a) for a in args[:3]]
    o, lse, _ = forward_reference(values(q), values(k), values(v), causal)
    if fn == "flash_fwd":
        return Fresh([q, k, v, *rest], kwargs, [o, lse], list(forward_reference(*old, causal)[:2]))
    if fn == "flash_attention":
        g = redrawn(args[3], rng)
        return Fresh([q, k, v, g, *rest], kwargs,
                     [o, *backward_reference(values(q), values(k), values(v), values(g), causal)],
                     [forward_reference(*old, causal)[0],
                      *backward_reference(*old, values(args[3]), causal)])
    o_in = redrawn(args[3], rng, round_to(o, args[3].dtype))
    lse_in = redrawn(args[4], rng, round_to(lse, args[4].dtype))
    do = redrawn(args[5], rng)
    return Fresh([q, k, v, o_in, lse_in, do, *rest], kwargs,
                 list(backward_reference(values(q), values(k), values(v), values(do), causal)),
                 list(backward_reference(*old, values(args[5]), causal)))
