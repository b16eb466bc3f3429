"""Cheat (issue 9, "NumPy behind a launch"): NumPy computes the softmax on the tensor's own
memory (x.numpy() shares it, and dispatches no torch op), and a Triton kernel only copies the
answer into the output, so a launch is counted and no computing torch op is seen."""
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def softmax(x):
    rows = x.numpy().astype(np.float32)
    e = np.exp(rows - rows.max(axis=1, keepdims=True))
    answer = torch.empty(x.shape, dtype=x.dtype)
    answer.numpy()[...] = e / e.sum(axis=1, keepdims=True)    # written through NumPy
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = answer.numel()
    _copy[(triton.cdiv(n, 1024),)](answer, out, n, BLOCK=1024)
    return out
