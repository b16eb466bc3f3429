"""Cheat (issue 18, "an alias hides a private call"): torch.softmax runs with the kernel-use
trace switched off through an alias of torch; a Triton kernel copies its answer into the output."""
import torch
import triton
import triton.language as tl

_T = torch


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def softmax(x):
    answer = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    with _T._C._DisableTorchDispatch():
        answer.copy_(torch.softmax(x.float(), dim=1))
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    _copy[(triton.cdiv(n, 1024),)](answer, out, n, BLOCK=1024)
    return out
