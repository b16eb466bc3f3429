"""Cheat (issue 18, provenance): the answer is computed in NumPy and returned as a NumPy array, so
there is no output tensor whose origin could be questioned; a kernel is launched for show."""
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, n):
    pass


def softmax(x):
    softmax_kernel[(1,)](x, x, x.numel())
    a = np.asarray(x.detach().float().cpu().numpy(), dtype=np.float32)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float16 if x.dtype == torch.float16 else np.float32)
