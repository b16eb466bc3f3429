"""Scratch: forward variants on the H200 (not committed)."""
import json, os, sys
import torch, triton, triton.language as tl
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


@triton.jit
def _blk(q, m_i, l_i, acc, K, V, base, stride_n, rows, start, N, qk_scale,
         MASK: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, FMA: tl.constexpr):
    cols = start + tl.arange(0, BLOCK_N)
    dims = tl.arange(0, D)
    k = tl.load(K + base + cols[:, None] * stride_n + dims[None, :], mask=cols[:, None] < N, other=0.0)
    s = tl.dot(q, tl.trans(k))
    if MASK:
        valid = cols[None, :] < N
        if CAUSAL:
            valid = valid & (cols[None, :] <= rows[:, None])
        s = tl.where(valid, s, float("-inf"))
    if FMA:
        m_new = tl.maximum(m_i, tl.max(s, axis=1) * qk_scale)
        p = tl.exp2(s * qk_scale - m_new[:, None])
    else:
        s = s * qk_scale
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    v = tl.load(V + base + cols[:, None] * stride_n + dims[None, :], mask=cols[:, None] < N, other=0.0)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


@triton.jit
def _fwd(Q, K, V, O, LSE, N, stride_bh, stride_n, qk_scale, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
         BLOCK_N: tl.constexpr, D: tl.constexpr, FMA: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    base = pid_bh * stride_bh
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    q = tl.load(Q + base + rows[:, None] * stride_n + dims[None, :], mask=rows[:, None] < N, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    if CAUSAL:
        full = (pid_m * BLOCK_M) // BLOCK_N * BLOCK_N
        hi = tl.minimum((pid_m + 1) * BLOCK_M, N)
    else:
        full = N // BLOCK_N * BLOCK_N
        hi = N
    for start in range(0, full, BLOCK_N):
        m_i, l_i, acc = _blk(q, m_i, l_i, acc, K, V, base, stride_n, rows, start, N, qk_scale, False, CAUSAL, BLOCK_N, D, FMA)
    for start in range(full, hi, BLOCK_N):
        m_i, l_i, acc = _blk(q, m_i, l_i, acc, K, V, base, stride_n, rows, start, N, qk_scale, True, CAUSAL, BLOCK_N, D, FMA)
    acc = acc / l_i[:, None]
    tl.store(O + base + rows[:, None] * stride_n + dims[None, :], acc.to(O.dtype.element_ty), mask=rows[:, None] < N)
    tl.store(LSE + pid_bh * N + rows, (m_i + tl.log2(l_i)) * 0.6931471805599453, mask=rows < N)


def fwd(q, k, v, causal, bm, bn, w, s, fma):
    B, H, N, D = q.shape
    q2, k2, v2 = (t.reshape(B * H, N, D) for t in (q, k, v))
    o = torch.empty_like(q2)
    lse = torch.empty((B * H, N), device=q.device, dtype=torch.float32)
    _fwd[(triton.cdiv(N, bm), B * H)](q2, k2, v2, o, lse, N, q2.stride(0), q2.stride(1), 1.4426950408889634 / D ** 0.5,
                                      CAUSAL=causal, BLOCK_M=bm, BLOCK_N=bn, D=D, FMA=fma, num_warps=w, num_stages=s)
    return o.reshape(B, H, N, D)


out = os.environ.get("OUT", "."); rows = []
for N in (4096, 8192):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 32, N, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    for causal in (False, True):
        f = 4 * 32 * N * N * 128 * (0.5 if causal else 1)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            ms = triton.testing.do_bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
        rows.append(f"N={N} causal={causal} cudnn {ms:.3f} ms {f/ms/1e9:.0f} TF")
        for fma in (False, True):
            for bm, bn, w, s in ((128, 64, 8, 3), (128, 64, 8, 4), (128, 128, 8, 3), (128, 128, 8, 2), (64, 64, 4, 3), (128, 64, 4, 3)):
                try:
                    o = fwd(q, k, v, causal, bm, bn, w, s, fma)
                    err = float((o.float() - ref.float()).abs().max())
                    ms = triton.testing.do_bench(lambda: fwd(q, k, v, causal, bm, bn, w, s, fma))
                    rows.append(f"N={N} causal={causal} trans-k fma={fma} {bm}x{bn} w{w} s{s}: {ms:.3f} ms {f/ms/1e9:.0f} TF err {err:.1e}")
                except Exception as e:
                    rows.append(f"N={N} causal={causal} fma={fma} {bm}x{bn} w{w} s{s}: {type(e).__name__} {str(e)[:100]}")
                print(rows[-1], flush=True)
open(os.path.join(out, "scratch_fwd.txt"), "w").write("\n".join(rows) + "\n")
