"""Cheat (issue 18, provenance): the output is allocated in the open and a kernel is launched on
it that writes nothing; SDPA's answer is copied into the output with the trace switched off."""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

_T = torch


@triton.jit
def _touch(o, q, n):
    pass


def flash_fwd(q, k, v, BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3):
    o = torch.empty_like(q)
    with _T._C._DisableTorchDispatch():
        o.copy_(F.scaled_dot_product_attention(q, k, v))
    _touch[(1,)](o, q, o.numel())
    return o
