"""Cheat (issue 18, provenance): the attention is computed in NumPy, outside every torch op, and a
Triton kernel only stores NumPy's answer into the output."""
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def flash_fwd(q, k, v, BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3):
    Q, K, V = (np.asarray(t.detach().float().cpu().numpy(), dtype=np.float64) for t in (q, k, v))
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    answer = torch.from_numpy((p / p.sum(axis=-1, keepdims=True)) @ V).to(q.device, q.dtype)
    o = torch.empty_like(q)
    n = o.numel()
    _copy[(triton.cdiv(n, 1024),)](answer, o, n, BLOCK=1024)
    return o
