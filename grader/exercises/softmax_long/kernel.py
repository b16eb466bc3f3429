"""softmax_long's kernel hooks: provenance's second replay (grader.judge.evidence.moved_inputs: x with its
values moved, BLOCK and num_warps kept) and compute-sanitizer's target (grader.judge.evidence.
sanitize.target_of: the calls the sanitizer check, test_gpu.py, runs under memcheck)."""

from __future__ import annotations

import numpy as np

from grader.judge.answers import reference
from grader.judge.evidence import sanitize
from grader.judge.evidence.moved_inputs import moved


def moved_inputs(fn, args, kwargs, rng):
    if fn != "softmax":
        return None
    return moved(args, kwargs, rng, 1, lambda x, *rest: [reference.softmax(x, axis=-1)])


# a long row past any one-tile path, with a ragged last block for any power-of-two BLOCK up to
# 32K; and short rows whose count no tile of several rows divides
SHAPES = ((3, 40001), (37, 781))


def _softmax_calls(sub, device: str) -> None:
    """softmax on each shape, seeded inputs the worker draws itself, each answer checked here."""
    import torch

    from grader.judge.answers.inputs import seeded, torch_randn

    for shape in SHAPES:
        seed = int(np.random.default_rng().integers(0, 2**31 - 1))
        got = sanitize.gated_call(sub, "softmax_long", "softmax", seeded(shape, "float16", device, seed))
        want = torch.softmax(torch_randn(shape, "float16", device, seed).float(), -1)
        if not sanitize.close_enough(got, want):
            raise sanitize.wrong_answer("softmax_long", "softmax", TARGET)


TARGET = sanitize.Target("x of shapes (3, 40001) and (37, 781) float16", _softmax_calls)
