"""flash_backward's moved inputs for provenance's second replay (grader.judge.evidence.fresh): the
tensors with their values moved (same shapes and dtypes), and the float64 answers of both.
flash_bwd is given the o and L of its new q, k, v (o rounded to its dtype), as flash_fwd would
have made them, so a backward that recomputes them instead of reading them is still right."""

from __future__ import annotations

from grader.exercises.flash_backward.reference import backward_reference, forward_reference
from grader.judge.evidence.fresh import moved, redrawn, values
from grader.judge.answers.inputs import round_to

POSITIONAL_CAUSAL = {"flash_fwd": 3, "flash_bwd": 6, "flash_attention": 3}


def _causal(fn, args, kwargs) -> bool:
    at = POSITIONAL_CAUSAL[fn]
    return bool(kwargs.get("causal", args[at] if len(args) > at else False))


def fresh(fn, args, kwargs, rng):
    if fn not in POSITIONAL_CAUSAL:
        return None
    causal = _causal(fn, args, kwargs)
    if fn == "flash_fwd":
        return moved(args, kwargs, rng, 3,
                     lambda q, k, v, *rest: forward_reference(q, k, v, causal)[:2])
    if fn == "flash_attention":   # its 4th tensor is the gradient g
        return moved(args, kwargs, rng, 4, lambda q, k, v, g, *rest: [
            forward_reference(q, k, v, causal)[0], *backward_reference(q, k, v, g, causal)])
    form = moved(args, kwargs, rng, 6,
                 lambda q, k, v, o, lse, do, *rest: backward_reference(q, k, v, do, causal))
    if form is not None:   # o and L as flash_fwd makes them from the moved q, k, v
        o, lse, _ = forward_reference(*(values(a) for a in form.args[:3]), causal)
        form.args[3] = redrawn(args[3], rng, round_to(o, args[3].dtype))
        form.args[4] = redrawn(args[4], rng, round_to(lse, args[4].dtype))
    return form
