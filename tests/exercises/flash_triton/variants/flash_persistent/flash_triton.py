"""Correct, in another style: a persistent grid. A fixed number of programs each loop over
(query block, batch*head) tiles with a stride of the program count; the four strides of each
(B, H, N, D) tensor are used as they are (no reshape), so any layout works."""
import torch
import triton
import triton.language as tl


@triton.jit
def _flash_fwd(Q, K, V, O, H, N, sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son,
               scale, n_tiles, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr):
    dims = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    n_m = tl.cdiv(N, BLOCK_M)
    for tile in range(tl.program_id(0), n_tiles, tl.num_programs(0)):
        bh = tile // n_m
        b = bh // H
        h = bh % H
        rows = (tile % n_m) * BLOCK_M + tl.arange(0, BLOCK_M)
        q = tl.load(Q + b * sqb + h * sqh + rows[:, None] * sqn + dims[None, :],
                    mask=rows[:, None] < N, other=0.0)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, D], tl.float32)
        for start in range(0, N, BLOCK_N):
            cols = start + offs_n
            k = tl.load(K + b * skb + h * skh + cols[None, :] * skn + dims[:, None],
                        mask=cols[None, :] < N, other=0.0)
            s = tl.where(cols[None, :] < N, tl.dot(q, k) * scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, axis=1)
            v = tl.load(V + b * svb + h * svh + cols[:, None] * svn + dims[None, :],
                        mask=cols[:, None] < N, other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
        tl.store(O + b * sob + h * soh + rows[:, None] * son + dims[None, :],
                 (acc / l_i[:, None]).to(O.dtype.element_ty), mask=rows[:, None] < N)


def flash_fwd(q, k, v, BLOCK_M=64, BLOCK_N=64):
    B, H, N, D = q.shape
    if q.stride(3) != 1 or k.stride(3) != 1 or v.stride(3) != 1:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    n_tiles = triton.cdiv(N, BLOCK_M) * B * H
    programs = min(n_tiles, 3)
    _flash_fwd[(programs,)](q, k, v, o, H, N, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
                            *o.stride()[:3], D ** -0.5, n_tiles,
                            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D)
    return o
