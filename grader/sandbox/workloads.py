"""Trusted objects built inside the worker for checks that pass a function *into* student code.

The trusted side asks for them with `codec.Trusted(name, **params)`; the worker builds them
here, before the student function runs. Their behaviour is known exactly, so what the student
code reports about them (a time, a row) can be checked against it.
"""

from __future__ import annotations

import time


class AsyncWork:
    """A stand-in for a GPU launch: the call returns at once, the work takes `ms` afterwards.

    Calls queue like kernels on one stream; `synchronize()` waits until the queue is empty.
    The first call also pays `first_call_ms` synchronously, like Triton compiling a kernel.
    Timing it without synchronising measures nothing; without warm-up, the compile.
    """

    # private: a submission handed this object should time it, not read its settings
    __slots__ = ("_ms", "_first_call_ms", "_calls", "_busy_until")

    def __init__(self, ms: float = 40.0, first_call_ms: float = 300.0):
        self._ms = ms
        self._first_call_ms = first_call_ms
        self._calls = 0
        self._busy_until = 0.0

    def __call__(self, *args, **kwargs):
        if self._calls == 0:
            time.sleep(self._first_call_ms / 1e3)
        self._calls += 1
        self._busy_until = max(time.perf_counter(), self._busy_until) + self._ms / 1e3
        return None

    def synchronize(self) -> None:
        delay = self._busy_until - time.perf_counter()
        if delay > 0:
            time.sleep(delay)


class OutOfMemoryAbove:
    """attention(q, k, v) that raises torch.OutOfMemoryError once N reaches `n`.

    Lets a CPU check see that a sweep records an out-of-memory run as None and goes on.
    """

    def __init__(self, n: int):
        self.n = n

    def __call__(self, q, k, v):
        import torch
        import torch.nn.functional as F

        if q.shape[-2] >= self.n:
            raise torch.OutOfMemoryError(f"simulated: attention at N={q.shape[-2]} does not fit")
        return F.scaled_dot_product_attention(q, k, v)


class Attention:
    """Plain PyTorch attention, a trusted implementation to put in a student's sweep."""

    def __call__(self, q, k, v):
        import torch.nn.functional as F

        return F.scaled_dot_product_attention(q, k, v)


def torch_dtype(dtype: str):
    """torch.<dtype> (e.g. "float32"), for a `dtype=` argument: dtypes do not cross the codec.

    Trusted("dtype", params={"dtype": "float32"}) (not "name": make() takes that).
    """
    import torch

    value = getattr(torch, dtype, None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"torch has no dtype {dtype!r}")
    return value


def submission_function(module: str, name: str):
    """A function of the submission's own module, e.g. bench_attn's naive, to pass back into it."""
    import importlib
    import sys

    if module not in sys.modules:   # e.g. flash_triton for bench_attn's sweep: from the sources
        importlib.import_module(module)
    return getattr(sys.modules[module], name)


_MAKERS = {"async_work": AsyncWork, "oom_above": OutOfMemoryAbove, "attention": Attention,
           "dtype": torch_dtype, "submission_function": submission_function}


def make(name: str, /, **params):
    return _MAKERS[name](**params)
