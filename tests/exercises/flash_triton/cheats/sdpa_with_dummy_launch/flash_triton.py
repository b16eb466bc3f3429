"""Cheat: launches a Triton kernel that does nothing, then lets PyTorch's SDPA compute."""
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _nothing(X):
    pass


def flash_fwd(q, k, v, BLOCK_M=64, BLOCK_N=64):
    _nothing[(1,)](q)   # a launch, to look like a kernel ran
    return F.scaled_dot_product_attention(q, k, v)
