"""Seeded inputs both sides draw: the same numbers in the worker (a tensor it builds itself, no
transfer) and in the grader (the reference's inputs)."""

from __future__ import annotations


def torch_randn(shape, dtype: str, device: str, seed: int, scale: float = 1.0,
                absolute: bool = False):
    """Standard normal values from torch's generator (|values| if `absolute`), times `scale`:
    the same numbers in every process."""
    import torch

    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    x = torch.randn(tuple(shape), generator=gen, device=device, dtype=torch.float32)
    if absolute:
        x.abs_()
    if scale != 1.0:
        x.mul_(scale)
    return x.to(getattr(torch, dtype))
