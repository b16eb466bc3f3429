"""Correct, in another style: host-side tensor descriptors (triton.tools.tensor_descriptor), as
Triton's tutorial 06 uses them. One 3-D descriptor per tensor over (B*H, N, D) with blocks of
[1, BLOCK, D]: rows past N of a head are outside the descriptor's shape, so loads pad them with
zeros and stores drop them; padded key scores are set to -inf."""
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def _flash_fwd(desc_q, desc_k, desc_v, desc_o, N, scale,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    q = desc_q.load([bh, start_m, 0]).reshape(BLOCK_M, D)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    offs_n = tl.arange(0, BLOCK_N)
    for start in range(0, N, BLOCK_N):
        k = desc_k.load([bh, start, 0]).reshape(BLOCK_N, D)
        v = desc_v.load([bh, start, 0]).reshape(BLOCK_N, D)
        s = tl.dot(q, tl.trans(k)) * scale
        s = tl.where((start + offs_n)[None, :] < N, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = (acc / l_i[:, None]).to(desc_o.dtype)
    desc_o.store([bh, start_m, 0], out.reshape(1, BLOCK_M, D))


def flash_fwd(q, k, v, BLOCK_M=64, BLOCK_N=64):
    B, H, N, D = q.shape
    q, k, v = (t.reshape(B * H, N, D).contiguous() for t in (q, k, v))
    o = torch.empty_like(q)
    descs = [TensorDescriptor.from_tensor(t, [1, BLOCK_M if t is q or t is o else BLOCK_N, D])
             for t in (q, k, v, o)]
    _flash_fwd[(triton.cdiv(N, BLOCK_M), B * H)](*descs, N, D ** -0.5,
                                                BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D)
    return o.reshape(B, H, N, D)
