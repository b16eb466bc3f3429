"""The inputs of the call being run, built in the worker from the markers the trusted side sends
(grader.wire.codec decodes them with `build_marker`): a TensorArg becomes a tensor drawn from
its seed (or from the array sent, or the array kept under its key by an earlier request), with
`guard` elements of poison right behind it in the same allocation; a Trusted marker becomes an
object of grader.worker.workloads, one per key and call. The probes read them while the call
runs (`built_inputs`, `guards`) and forget them after it (`forget_inputs`).
"""

from __future__ import annotations

import numpy as np

from grader.wire import codec
from grader.wire.seeded import torch_randn
from grader.worker import workloads

_built_tensors: list = []   # (view, guard) for each TensorArg, in argument order
_trusted: dict = {}         # key -> object from grader.worker.workloads


# a timed request's array inputs, by codec.TensorArg.kept: the values as first built (each
# request's input is a copy in an allocation of its own, so a call that writes into its input
# changes no later request's); the last KEPT_MAX only (flash_bwd's o and lse of one reading)
_kept: dict = {}
KEPT_MAX = 4


def _keep(key: str, values) -> None:
    _kept.pop(key, None)
    _kept[key] = values
    while len(_kept) > KEPT_MAX:
        _kept.pop(next(iter(_kept)))


def built_inputs() -> list:
    """The tensors built from the call's TensorArg markers, in argument order."""
    return [view for view, _ in _built_tensors]


def forget_inputs() -> None:
    """Drop the tensors built so far for a message whose inputs could not all be built."""
    _built_tensors.clear()
    _trusted.clear()


def build_marker(marker):
    """Make the worker-side object for a TensorArg or Trusted marker."""
    if isinstance(marker, codec.TensorArg):
        return _build_tensor(marker)
    obj = _trusted.get(marker.key) if marker.key else None
    if obj is None:
        obj = workloads.make(marker.name, **marker.params)
        if marker.key:
            _trusted[marker.key] = obj
    return getattr(obj, marker.attr) if marker.attr else obj


def _build_tensor(m: codec.TensorArg):
    import torch

    dtype = getattr(torch, m.dtype)
    if m.array is None and m.seed is None and m.kept:
        values = _kept.get(m.kept)
        if values is None:   # the grader's fault (the worker answers grader_error)
            raise ValueError(f"no input kept under {m.kept!r} in this worker")
    elif m.array is None:
        values = torch_randn(m.shape, m.dtype, m.device, m.seed, m.scale, m.absolute)
    else:
        values = torch.from_numpy(np.ascontiguousarray(m.array)).to(m.device, dtype)
        if m.kept:
            _keep(m.kept, values)
    shape = tuple(values.shape)
    if m.pad_cols:   # rows of cols + pad_cols elements; the tensor is the first cols of each
        rows, cols = shape
        width = cols + m.pad_cols
        n = rows * width
        buf = torch.full((n + m.guard,), m.poison, dtype=dtype, device=m.device)
        view = buf[:n].view(rows, width)[:, :cols]
        view.copy_(values)
    else:
        # one allocation: the values, then `guard` elements of poison right behind them
        n = int(values.numel())
        buf = torch.full((n + m.guard,), m.poison, dtype=dtype, device=m.device)
        buf[:n] = values.reshape(-1)
        view = buf[:n].view(shape)
    del values
    _built_tensors.append((view, buf[n:]))
    return view



def guards() -> list:
    """The poison right behind each tensor built for the call (its `guard` elements), in
    argument order."""
    return [guard for _, guard in _built_tensors]
