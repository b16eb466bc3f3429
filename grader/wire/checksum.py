"""Fresh inputs and checksums of timed runs, used on both sides: in the worker around each perf
call (grader.worker.probes) and in the grader for the references
(grader.judge.perf.timed_requests). Same device, same dtype, same generator: the same numbers."""

from __future__ import annotations


def timed_request(opts) -> bool:
    """A perf-layer request (timed `runs`, the `fetch` of its last output, its `programs`), as
    both sides tell it: the trusted proxy records it without a profiler (grader.fixtures.ProvingSubmission),
    and the worker keeps what it allocated for the next request (grader.worker.worker)."""
    return isinstance(opts, dict) and bool(opts.get("runs") or opts.get("fetch")
                                           or "programs" in opts)


def refill(t, seed: int, std: float = 1.0) -> None:
    """Overwrite tensor t in place with normal values (0, std) from torch's generator at `seed`:
    one write pass, no temporary."""
    import torch

    gen = torch.Generator(device=t.device)
    gen.manual_seed(int(seed))
    t.normal_(0.0, float(std), generator=gen)


def checksum_weights(out, seed: int):
    """(w, r): w one weight per column of the output's last dimension, r one per row, uniform
    in [-1, 1), drawn on the output's device. None when `out` is not a tensor.

    An output that is a tuple of tensors (flash_fwd's (o, lse), flash_bwd's (dq, dk, dv)) gets a
    list of such pairs, one per tensor, each from its own seed."""
    import torch

    if isinstance(out, (tuple, list)):
        parts = [checksum_weights(t, int(seed) + 7919 * i) for i, t in enumerate(out)]
        return parts if parts and all(p is not None for p in parts) else None
    if not isinstance(out, torch.Tensor) or out.dim() < 1 or out.numel() == 0:
        return None
    gen = torch.Generator(device=out.device)
    gen.manual_seed(int(seed))
    cols = out.shape[-1]
    rows = out.numel() // cols
    w = torch.rand(cols, generator=gen, device=out.device) * 2 - 1
    r = torch.rand(rows, generator=gen, device=out.device) * 2 - 1
    return w, r


def checksum(out, weights):
    """sum_i r_i * (out_i . w): one read of the output. Each row's dot product needs that whole
    row right, and the random weights make a wrong row show. NaN when out is not a tensor of
    the shape the weights were drawn for."""
    import torch

    if isinstance(weights, list):    # a tuple of outputs: the sum of their checksums
        if not isinstance(out, (tuple, list)) or len(out) != len(weights):
            return torch.tensor(float("nan"))
        return torch.stack([checksum(t, w).float().reshape(()) for t, w in zip(out, weights)]).sum()
    if weights is None or not isinstance(out, torch.Tensor) or out.numel() == 0:
        return torch.tensor(float("nan"))
    w, r = weights
    if out.shape[-1] != w.numel() or out.numel() != w.numel() * r.numel():
        return torch.tensor(float("nan"), device=r.device)
    y = out.reshape(-1, w.numel()) @ w.to(out.dtype)     # (rows,) one dot product per row
    return (y.float() * r).sum()


def to_floats(sums: list) -> list[float]:
    """The checksums as numbers: one device-to-host copy for all of them (the same cost for the
    student's requests and the baselines'), one each only when they sit on several devices."""
    import torch

    try:
        return torch.stack([s.reshape(()) for s in sums]).tolist()
    except (RuntimeError, TypeError):
        return [float(s) for s in sums]
