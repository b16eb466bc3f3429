"""Cheat: launches a kernel and returns a fresh output it never writes, hoping the allocator
hands back memory that already holds the answer (the "150x faster kernel" trick)."""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    pass   # stores nothing


def softmax(x):
    out = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](out, x, x.stride(0), x.shape[1], BLOCK=16)
    return out
