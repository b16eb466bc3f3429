"""Correct, in another style: the key loop split in two, as production kernels do. Full key
blocks run without masks or tl.where (they cannot reach past N); the one partial block at the
end is loaded with masks and its padded scores set to -inf. exp2 with the scale folded in,
and tl.dot(p, v, acc) accumulating in place."""
import torch
import triton
import triton.language as tl


@triton.jit
def _step(q, K, V, base, start, N, stride_n, qk_scale, m_i, l_i, acc, offs_n, dims,
          MASKED: tl.constexpr):
    cols = start + offs_n
    if MASKED:
        k = tl.load(K + base + cols[None, :] * stride_n + dims[:, None],
                    mask=cols[None, :] < N, other=0.0)
        v = tl.load(V + base + cols[:, None] * stride_n + dims[None, :],
                    mask=cols[:, None] < N, other=0.0)
    else:
        k = tl.load(K + base + cols[None, :] * stride_n + dims[:, None])
        v = tl.load(V + base + cols[:, None] * stride_n + dims[None, :])
    s = tl.dot(q, k) * qk_scale
    if MASKED:
        s = tl.where(cols[None, :] < N, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    p = tl.math.exp2(s - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return m_new, l_i, acc


@triton.jit
def _flash_fwd(Q, K, V, O, N, stride_bh, stride_n, qk_scale,
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
    full = (N // BLOCK_N) * BLOCK_N
    for start in range(0, full, BLOCK_N):
        m_i, l_i, acc = _step(q, K, V, base, start, N, stride_n, qk_scale, m_i, l_i, acc,
                              offs_n, dims, MASKED=False)
    if full < N:
        m_i, l_i, acc = _step(q, K, V, base, full, N, stride_n, qk_scale, m_i, l_i, acc,
                              offs_n, dims, MASKED=True)
    tl.store(O + base + rows[:, None] * stride_n + dims[None, :],
             (acc / l_i[:, None]).to(O.dtype.element_ty), mask=rows[:, None] < N)


def flash_fwd(q, k, v, BLOCK_M=64, BLOCK_N=64):
    B, H, N, D = q.shape
    q, k, v = (t.reshape(B * H, N, D).contiguous() for t in (q, k, v))
    o = torch.empty_like(q)
    qk_scale = D ** -0.5 * 1.4426950408889634   # exp(x) = exp2(x * log2(e))
    _flash_fwd[(triton.cdiv(N, BLOCK_M), B * H)](q, k, v, o, N, q.stride(0), q.stride(1), qk_scale,
                                                BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D)
    return o.reshape(B, H, N, D)
