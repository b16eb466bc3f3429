"""Cheat (GPU only): the real kernel runs on a side stream and flash_fwd returns at once, so a
timer that records events on the caller's stream, without a device-wide synchronise, sees
almost nothing. On the CPU (the interpreter) there are no streams and this is an honest kernel."""
import torch
import triton
import triton.language as tl


@triton.jit
def _flash_fwd(Q, K, V, O, N, stride_bh, stride_n, scale,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr):
    pid_m = tl.program_id(0)
    base = tl.program_id(1) * stride_bh
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)
    q = tl.load(Q + base + rows[:, None] * stride_n + dims[None, :], mask=rows[:, None] < N, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs_n
        k = tl.load(K + base + cols[None, :] * stride_n + dims[:, None], mask=cols[None, :] < N, other=0.0)
        s = tl.where(cols[None, :] < N, tl.dot(q, k) * scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(V + base + cols[:, None] * stride_n + dims[None, :], mask=cols[:, None] < N, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(O + base + rows[:, None] * stride_n + dims[None, :],
             (acc / l_i[:, None]).to(O.dtype.element_ty), mask=rows[:, None] < N)


_side = None


def flash_fwd(q, k, v, BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3):
    global _side
    B, H, N, D = q.shape
    q, k, v = (t.reshape(B * H, N, D).contiguous() for t in (q, k, v))
    o = torch.empty_like(q)
    grid = (triton.cdiv(N, BLOCK_M), B * H)
    if q.is_cuda:
        _side = _side or torch.cuda.Stream()
        with torch.cuda.stream(_side):   # not the caller's stream, and no wait before returning
            _flash_fwd[grid](q, k, v, o, N, q.stride(0), q.stride(1), 1.0 / D ** 0.5,
                             BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D, num_warps=num_warps,
                             num_stages=num_stages)
    else:
        _flash_fwd[grid](q, k, v, o, N, q.stride(0), q.stride(1), 1.0 / D ** 0.5,
                         BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D)
    return o.reshape(B, H, N, D)
