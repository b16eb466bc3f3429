"""flash_backward's kernel hooks, for the grader's tools that run its kernels outside a check's
own call.

Provenance's second replay (grader.judge.evidence.moved_inputs): the tensors with their values moved
(same shapes and dtypes), and the float64 answers of both. flash_bwd is given the o and L of its
new q, k, v (o rounded to its dtype), as flash_fwd would have made them, so a backward that
recomputes them instead of reading them is still right.

Compute-sanitizer's target (grader.judge.evidence.sanitize.target_of): causal flash_fwd and
flash_bwd at N = 1000, run under compute-sanitizer by the gpu layer's flash_backward.sanitizer
check."""

from __future__ import annotations

import numpy as np

from grader.exercises.flash_backward.reference import backward_reference, forward_reference
from grader.judge.answers.inputs import round_to, tensor
from grader.judge.evidence import sanitize
from grader.judge.evidence.moved_inputs import moved, redrawn, values


POSITIONAL_CAUSAL = {"flash_fwd": 3, "flash_bwd": 6, "flash_attention": 3}


def _causal(fn, args, kwargs) -> bool:
    at = POSITIONAL_CAUSAL[fn]
    return bool(kwargs.get("causal", args[at] if len(args) > at else False))


def moved_inputs(fn, args, kwargs, rng):
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


def _call(sub, device: str) -> None:
    """Causal flash_fwd and flash_bwd at N = 1000 (no block size divides it), seeded inputs the
    worker draws itself, the answers checked here (loosely: the values are other checks' job)."""
    from grader.judge.answers import gpu as g
    from grader.judge.answers.inputs import seeded, torch_randn

    shape = (1, 2, 1000, 64)
    seeds = [int(x) for x in np.random.default_rng().integers(0, 2**31 - 1, size=4)]
    markers = [seeded(shape, "float16", device, s) for s in seeds]
    q, k, v, do = (torch_randn(shape, "float16", device, s) for s in seeds)
    got = sanitize.gated_call(sub, "flash_backward", "flash_fwd", *markers[:3], causal=True)
    ref_o, ref_lse = g.attention_lse_reference(q, k, v, causal=True)
    if not (isinstance(got, (tuple, list)) and len(got) == 2 and sanitize.close_enough(got[0], ref_o)
            and sanitize.close_enough(got[1], ref_lse)):
        raise sanitize.wrong_answer("flash_backward", "flash_fwd", TARGET)
    o = ref_o.half()
    got = sanitize.gated_call(sub, "flash_backward", "flash_bwd", *markers[:3],
                              tensor(o.cpu().numpy(), "float16", device=device),
                              tensor(ref_lse.cpu().numpy(), "float32", device=device), markers[3],
                              causal=True)
    ref = g.attention_grads_reference(q, k, v, do, True, dtype="float32")
    if not (isinstance(got, (tuple, list)) and len(got) == 3 and all(
            sanitize.close_enough(x, r, tol=5e-2) for x, r in zip(got, ref))):
        raise sanitize.wrong_answer("flash_backward", "flash_bwd", TARGET)


TARGET = sanitize.Target("causal, q, k, v, do of shape (1, 2, 1000, 64) float16", _call)
