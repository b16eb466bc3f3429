"""Inputs for checks: fresh random values, exact in the dtype the student receives, awkward
sizes, and tensors with poison behind them.

Every generator takes the check's `rng` (a fresh seed per check). Values are rounded to the
target dtype here, on the trusted side, so the float64 reference is computed from exactly the
numbers the student's code sees.
"""

from __future__ import annotations

import numpy as np

from grader.wire.codec import TensorArg
from grader.wire.seeded import torch_randn  # noqa: F401 - the checks' GPU inputs

POISON = float("nan")


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """Values of `x` rounded to `dtype`, returned as float32/float64 arrays holding exact values."""
    x = np.asarray(x, dtype=np.float64)
    if dtype == "float64":
        return x
    if dtype == "float32":
        return x.astype(np.float32)
    if dtype == "float16":
        return x.astype(np.float16)
    if dtype == "bfloat16":  # round to nearest even on the top 16 bits of float32
        bits = x.astype(np.float32).view(np.uint32)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.astype(np.uint32).view(np.float32)
    raise ValueError(dtype)


def randn(rng, shape, dtype: str = "float32", scale: float = 1.0) -> np.ndarray:
    return round_to(rng.standard_normal(shape) * scale, dtype)


def tensor(array: np.ndarray, dtype: str, device: str = "cpu", guard: int = 0,
           poison: float = POISON, pad_cols: int = 0) -> TensorArg:
    """A torch tensor for the worker to build; `guard` poison elements follow it in memory.

    pad_cols (2-D): every row is followed by that many poison elements, so the tensor is a
    column slice of a wider one and its row stride is not its width."""
    return TensorArg(np.asarray(array), dtype, device, guard, poison, pad_cols=pad_cols)


def seeded(shape, dtype: str, device: str, seed: int, scale: float = 1.0, guard: int = 0,
           poison: float = POISON, absolute: bool = False) -> TensorArg:
    """A tensor the worker draws itself (no transfer): `torch_randn` with these arguments."""
    return TensorArg(None, dtype, device, guard, poison, tuple(shape), int(seed), float(scale),
                     absolute)


def chunks(rng, n: int, parts: int) -> list[slice]:
    """`parts` uneven, non-empty slices covering range(n)."""
    cuts = np.sort(rng.choice(np.arange(1, n), size=parts - 1, replace=False))
    edges = [0, *cuts.tolist(), n]
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:])]
