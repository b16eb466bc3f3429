"""Cheat (issue 18, "an alias hides a private call"): an alias of torch reaches
torch._C._DisableTorchDispatch, so the kernel-use trace does not see SDPA; SDPA's answer is put
in a buffer allocated in the open, and a Triton kernel copies that buffer into the output."""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

_T = torch


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def flash_fwd(q, k, v, BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3):
    answer = torch.empty_like(q)                  # traced: an honest-looking allocation
    with _T._C._DisableTorchDispatch():           # nothing below is traced
        answer.copy_(F.scaled_dot_product_attention(q, k, v))
    o = torch.empty_like(q)
    n = o.numel()
    _copy[(triton.cdiv(n, 1024),)](answer, o, n, BLOCK=1024)
    return o
