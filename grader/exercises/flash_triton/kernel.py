"""flash_triton's kernel hooks, for the grader's tools that run flash_fwd's kernel outside a
check's own call: provenance's second replay (grader.judge.evidence.moved_inputs: q, k, v with their
values moved, the block sizes kept) and compute-sanitizer's target (grader.judge.evidence.
sanitize.target_of: the call that memcheck runs, and how its answer is checked here)."""

from __future__ import annotations

import numpy as np

from grader.exercises.flash_triton.reference import reference_torch
from grader.judge.answers import reference
from grader.judge.evidence import sanitize
from grader.judge.evidence.moved_inputs import moved


def moved_inputs(fn, args, kwargs, rng):
    if fn != "flash_fwd":
        return None
    return moved(args, kwargs, rng, 3, lambda q, k, v, *rest: [reference.attention(q, k, v)])


def _sanitizer_call(sub, device: str) -> None:
    """flash_fwd at N = 1000 (the last key block of 64 holds 40 keys), seeded inputs the worker
    draws itself, the answer checked here."""
    from grader.judge.answers.inputs import seeded, torch_randn

    shape = (1, 2, 1000, 64)
    seeds = [int(x) for x in np.random.default_rng().integers(0, 2**31 - 1, size=3)]
    got = sanitize.gated_call(sub, "flash_triton", "flash_fwd",
                              *(seeded(shape, "float16", device, s) for s in seeds))
    q, k, v = (torch_randn(shape, "float16", device, s).float() for s in seeds)
    if not sanitize.close_enough(got, reference_torch(q, k, v)):
        raise sanitize.wrong_answer("flash_triton", "flash_fwd", TARGET)


TARGET = sanitize.Target("q, k, v of shape (1, 2, 1000, 64) float16, BLOCK_N 64",
                         _sanitizer_call)
