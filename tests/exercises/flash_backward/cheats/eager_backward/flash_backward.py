"""Cheat: flash_attention's forward is a Triton kernel, its backward eager PyTorch (N x N autograd).

On a GPU the backward runs on autograd's device thread: the gate must still see its cuBLAS and
softmax kernels (the profiler records every thread). flash_fwd and flash_bwd are not the cheat's.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _attn(Q, K, V, O, N, scale, CAUSAL: tl.constexpr, BLOCK: tl.constexpr, D: tl.constexpr):
    pid, bh = tl.program_id(0), tl.program_id(1)
    rows = pid * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    dims = tl.arange(0, D)
    base = bh * N * D
    q = tl.load(Q + base + rows[:, None] * D + dims[None, :], mask=rows[:, None] < N, other=0.0)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK], tl.float32)
    acc = tl.zeros([BLOCK, D], tl.float32)
    for start in range(0, N, BLOCK):
        c = start + cols
        k = tl.load(K + base + c[:, None] * D + dims[None, :], mask=c[:, None] < N, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        ok = c[None, :] < N
        if CAUSAL:
            ok = ok & (c[None, :] <= rows[:, None])
        s = tl.where(ok, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m - m_new)
        v = tl.load(V + base + c[:, None] * D + dims[None, :], mask=c[:, None] < N, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        l = l * alpha + tl.sum(p, axis=1)
        m = m_new
    tl.store(O + base + rows[:, None] * D + dims[None, :], (acc / l[:, None]).to(O.dtype.element_ty),
             mask=rows[:, None] < N)


def flash_fwd(q, k, v, causal=False, BLOCK_M=64, BLOCK_N=64):
    raise NotImplementedError


def flash_bwd(q, k, v, o, lse, do, causal=False, BLOCK_M=32, BLOCK_N=32):
    raise NotImplementedError


class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        B, H, N, D = q.shape
        qc, kc, vc = (t.contiguous() for t in (q, k, v))
        o = torch.empty_like(qc)
        _attn[(triton.cdiv(N, 32), B * H)](qc, kc, vc, o, N, D ** -0.5, CAUSAL=causal, BLOCK=32, D=D)
        ctx.save_for_backward(q, k, v)
        ctx.causal = causal
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v = ctx.saved_tensors
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            s = (leaves[0] @ leaves[1].transpose(-2, -1)) * q.shape[-1] ** -0.5
            if ctx.causal:
                N = q.shape[-2]
                s = s.masked_fill(torch.ones(N, N, dtype=torch.bool, device=q.device).triu(1),
                                  float("-inf"))
            o = torch.softmax(s.float(), dim=-1).to(q.dtype) @ leaves[2]
            dq, dk, dv = torch.autograd.grad(o, leaves, do)
        return dq, dk, dv, None


def flash_attention(q, k, v, causal=False):
    return FlashAttention.apply(q, k, v, causal)
