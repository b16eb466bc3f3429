"""softmax_triton's kernel hooks: provenance's second replay (grader.judge.evidence.moved_inputs: x with
its values moved) and compute-sanitizer's target (grader.judge.evidence.sanitize.target_of: the
call the sanitizer check, test_gpu.py, runs under memcheck)."""

from __future__ import annotations

import numpy as np

from grader.judge.answers import reference
from grader.judge.evidence import sanitize
from grader.judge.evidence.moved_inputs import moved


def moved_inputs(fn, args, kwargs, rng):
    if fn != "softmax":
        return None
    return moved(args, kwargs, rng, 1, lambda x, *rest: [reference.softmax(x, axis=-1)])


def _softmax_call(sub, device: str) -> None:
    """softmax at 781 columns (not a power of two, so BLOCK_SIZE has 243 padded lanes), seeded
    inputs the worker draws itself, the answer checked here."""
    import torch

    from grader.judge.answers.inputs import seeded, torch_randn

    shape, seed = (37, 781), int(np.random.default_rng().integers(0, 2**31 - 1))
    got = sanitize.gated_call(sub, "softmax_triton", "softmax", seeded(shape, "float16", device, seed))
    if not sanitize.close_enough(got, torch.softmax(torch_randn(shape, "float16", device, seed).float(), -1)):
        raise sanitize.wrong_answer("softmax_triton", "softmax", TARGET)


TARGET = sanitize.Target("x of shape (37, 781) float16", _softmax_call)
