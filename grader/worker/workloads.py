"""Trusted objects built inside the worker for checks that pass a function *into* student code.

The trusted side asks for them with `codec.Trusted(name, **params)`; the worker builds them
here, before the student function runs. Their behaviour is known exactly, so what the student
code reports about them (a time, a row) can be checked against it.
"""

from __future__ import annotations

import contextlib

from grader.worker.read_recorder import ReadRecorder
from grader.worker.row_recorder import RowRecorder


class AsyncWork:
    """A stand-in for a GPU launch whose timing lives in the grader, not here.

    It holds a socket and nothing else: each call sends "launch" and returns when the grader
    answers (at once, like a queued kernel; the first call after a compile; a `blocking` stream
    after its work), and `synchronize()` sends "sync" and returns when the grader says every
    launch so far has finished. The durations are drawn and kept in the grader's process
    (grader.exercises.bench_attn.reference.Clock), which also logs every request on its own clock:
    nothing in this object tells a submission what the answer is, and the grader counts the
    calls itself.
    """

    __slots__ = ("_sock",)

    def __init__(self, socket: str, stream: str):
        import socket as _socket

        self._sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self._sock.connect(socket)            # relative: the worker's cwd is its scratch folder
        self._sock.sendall(f"H {stream}\n".encode())
        _LIVE.append(self)

    def _ask(self, line: str) -> None:
        self._sock.sendall(line.encode() + b"\n")
        if self._sock.recv(1) != b".":
            raise RuntimeError("the grader's clock stopped answering")

    def __call__(self, *args, **kwargs):
        n = _seq_len(args)
        self._ask(f"L {n}")
        return None

    def synchronize(self) -> None:
        self._ask("S")


def _seq_len(args) -> int:
    """N of an attention call (q is (B, H, N, D)), so a sweep's runs can differ per N."""
    shape = getattr(args[0], "shape", None) if args else None
    return int(shape[-2]) if shape is not None and len(shape) >= 2 else 0


_LIVE: list = []   # AsyncWork objects of the call being run


@contextlib.contextmanager
def routed_synchronize():
    """During a call, torch.cuda.synchronize() waits for the workloads it was given, and on a
    machine without CUDA (the CPU layers) does nothing else: CPU ops finish before they return.

    On a GPU, a timer that calls torch.cuda.synchronize() instead of its `sync` argument is
    right; this makes it right on the CPU too. On a CUDA worker with no workload, torch's own
    synchronize stays."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not (_LIVE or not torch.cuda.is_available()):
        try:
            yield
        finally:
            _LIVE.clear()
        return
    saved = torch.cuda.synchronize
    live = list(_LIVE)

    def synchronize(device=None):
        for work in live:
            work.synchronize()

    torch.cuda.synchronize = synchronize
    try:
        yield
    finally:
        torch.cuda.synchronize = saved
        for work in live:
            try:
                work._sock.close()
            except OSError:
                pass
        _LIVE.clear()


SDPA_BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")


def clocked_query(socket: str, shape: list, seed: int):
    """q for probe_backends: a float32 tensor of `shape` (drawn from `seed`) whose every
    scaled_dot_product_attention runs the real op, then, when it ran, one blocking launch on the
    grader's clock of the stream named for the backend that sdpa_kernel forced (the stream "ANY"
    when none is forced). So the time the student reports per backend can be checked against
    the grader's clock, like a sweep row. Tensors derived from it (q.contiguous(), q * 1) are
    clocked too; outputs are real."""
    import torch
    import torch.nn.functional as F

    works = {name: AsyncWork(socket, name) for name in (*SDPA_BACKENDS, "ANY")}

    class ClockedQuery(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            out = super().__torch_function__(func, types, args, kwargs or {})
            if func is F.scaled_dot_product_attention:
                works[_forced_backend(torch)](*args)
            return out

    generator = torch.Generator().manual_seed(int(seed))
    return torch.randn(tuple(shape), generator=generator).as_subclass(ClockedQuery)


def _forced_backend(torch) -> str:
    """The SDPA backend sdpa_kernel(backend) left enabled, or "ANY" when several are."""
    enabled = {"FLASH_ATTENTION": torch.backends.cuda.flash_sdp_enabled(),
               "EFFICIENT_ATTENTION": torch.backends.cuda.mem_efficient_sdp_enabled(),
               "CUDNN_ATTENTION": torch.backends.cuda.cudnn_sdp_enabled(),
               "MATH": torch.backends.cuda.math_sdp_enabled()}
    on = [name for name, flag in enabled.items() if flag]
    return on[0] if len(on) == 1 else "ANY"


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


_MAKERS = {"async_work": AsyncWork, "clocked_query": clocked_query, "oom_above": OutOfMemoryAbove,
           "attention": Attention,
           "dtype": torch_dtype, "submission_function": submission_function}
_MAKERS["read_recorder"] = ReadRecorder   # inputs that log how they are read
_MAKERS["row_recorder"] = RowRecorder     # (N, d) inputs that log which rows are read


def make(name: str, /, **params):
    return _MAKERS[name](**params)
