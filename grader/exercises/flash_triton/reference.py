"""Inputs and references of flash_triton, shared by its check modules, its hidden checks and its
sanitizer target: q, k, v holding values exact in the dtype the kernel sees (so the float64
reference, grader.judge.answers.reference.attention, sees the same numbers), and a float32 torch
reference for the sanitizer's call.
"""

from __future__ import annotations

import numpy as np

from grader.judge.answers.inputs import randn, round_to


def qkv(rng, shape, dtype="float16", scale=1.0):
    """q, k, v: (B, H, N, D) arrays holding values exact in `dtype`."""
    return tuple(randn(rng, shape, dtype, scale) for _ in range(3))


def shifted_qkv(rng, shape, shift=16.0):
    """q, k, v with `shift` added to every score (coordinate 0 of q and of every key is the same
    c, c^2 / sqrt(D) = shift): the same softmax, with real scores far above a padded key's 0."""
    q, k, v = qkv(rng, shape)
    c = round_to(np.array(np.sqrt(shift * np.sqrt(shape[-1]))), "float16")
    q[..., 0] = c
    k[..., 0] = c
    return q, k, v


def reference_torch(q, k, v):
    """softmax(q @ k^T / sqrt(D)) @ v in torch, in the dtype and on the device of q, k, v."""
    import torch

    return torch.softmax((q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5, dim=-1) @ v
