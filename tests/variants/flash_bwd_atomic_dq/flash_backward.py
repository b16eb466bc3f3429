"""FlashAttention forward with the logsumexp, causal masking, and the backward pass, in Triton
(a correct variant: dQ summed with atomics, as in FlashAttention-2's original Triton kernel).

tests/variants/flash_bwd_atomic_dq: the solution with one change. One program per key block
computes dK, dV and that key block's share of dQ, and adds the share into a float32 dQ
(zero-initialised) with tl.atomic_add: several programs add into the same rows at once, so a
plain load + store would lose updates on a GPU (tests/mutants/flash_backward.py, dq_race).
Afterwards dQ is cast to q's dtype.

Lesson: FlashAttention and kernels, "FlashAttention's forward pass" (L = m + log(l), kept "for the
backward pass"), the backward pass (recompute P = exp(S - L) tile by tile; the D = rowsum(dO * O)
trick) and FlashAttention-2's causal block skipping.

What you will learn:
  - the forward saves one number per row, L = m + log(l), and nothing N x N;
  - causal attention: key j is visible to query i iff j <= i; the key loop stops at the
    diagonal (key blocks fully above it are never loaded), and only the blocks that cross the
    diagonal are masked;
  - the backward recomputes P = exp(S - L) from Q, K and L instead of remembering it, and uses
    D = rowsum(dO * O) so that dS = P * (dP - D) needs no row of P summed again;
  - one program per key block computes dK and dV (looping over the query blocks) and adds its
    share of dQ into a float32 buffer with tl.atomic_add: dQ has many writers.

Internally the exponentials are exp2 with log2(e) folded into the scale (what GPUs compute
natively); the L returned is in natural log: L = (m2 + log2(l)) * ln(2).

Run:
  python solutions/flash_backward.py                      # on a CUDA machine
  TRITON_INTERPRET=1 python solutions/flash_backward.py   # on a CPU, with CPU tensors (slow)
"""

import os
import sys

import torch
import triton
import triton.language as tl

# log2(e): exp(x) = exp2(x * LOG2E); and ln(2) = 0.6931471805599453: log(x) = log2(x) * ln(2).
# The kernels write both as literals (a @triton.jit function reads only constexpr globals).
LOG2E = 1.4426950408889634


# ------------------------------------------------------------------------------ forward


@triton.jit
def _fwd_block(q, m_i, l_i, acc, K, V, base, stride_n, rows, start, N, qk_scale,
               MASK: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr):
    """One key block of the online softmax, in log2 units (qk_scale holds log2(e))."""
    cols = start + tl.arange(0, BLOCK_N)
    dims = tl.arange(0, D)
    k = tl.load(K + base + cols[None, :] * stride_n + dims[:, None],
                mask=cols[None, :] < N, other=0.0)                       # (D, BLOCK_N)
    s = tl.dot(q, k) * qk_scale                                          # scores * log2(e)
    if MASK:   # only the blocks that cross the diagonal or the end of the keys
        valid = cols[None, :] < N
        if CAUSAL:
            valid = valid & (cols[None, :] <= rows[:, None])             # key j visible iff j <= i
        s = tl.where(valid, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    p = tl.exp2(s - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    v = tl.load(V + base + cols[:, None] * stride_n + dims[None, :],
                mask=cols[:, None] < N, other=0.0)                       # (BLOCK_N, D)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


@triton.jit
def _flash_fwd(Q, K, V, O, LSE, N, stride_bh, stride_n, qk_scale,
               CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               D: tl.constexpr):
    pid_m = tl.program_id(0)            # which query block
    pid_bh = tl.program_id(1)           # which (batch, head)
    base = pid_bh * stride_bh
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    q = tl.load(Q + base + rows[:, None] * stride_n + dims[None, :],
                mask=rows[:, None] < N, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running max (log2 units)
    l_i = tl.zeros([BLOCK_M], tl.float32)                # running sum of exp2(s - m_i)
    acc = tl.zeros([BLOCK_M, D], tl.float32)             # running sum of exp2(s - m_i) * v

    if CAUSAL:
        # key blocks entirely left of this query block's first row need no mask; the loop
        # stops at the diagonal: blocks fully above it are never loaded
        full = (pid_m * BLOCK_M) // BLOCK_N * BLOCK_N
        hi = tl.minimum((pid_m + 1) * BLOCK_M, N)
    else:
        full = N // BLOCK_N * BLOCK_N
        hi = N
    for start in range(0, full, BLOCK_N):
        m_i, l_i, acc = _fwd_block(q, m_i, l_i, acc, K, V, base, stride_n, rows, start, N,
                                   qk_scale, False, CAUSAL, BLOCK_N, D)
    for start in range(full, hi, BLOCK_N):
        m_i, l_i, acc = _fwd_block(q, m_i, l_i, acc, K, V, base, stride_n, rows, start, N,
                                   qk_scale, True, CAUSAL, BLOCK_N, D)

    acc = acc / l_i[:, None]
    tl.store(O + base + rows[:, None] * stride_n + dims[None, :],
             acc.to(O.dtype.element_ty), mask=rows[:, None] < N)
    # L = m + log(l), back in natural-log units, for the backward pass
    lse = (m_i + tl.log2(l_i)) * 0.6931471805599453
    tl.store(LSE + pid_bh * N + rows, lse, mask=rows < N)


def flash_fwd(q, k, v, causal=False, BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3):
    """softmax(q k^T / sqrt(D) [+ causal mask]) v and its logsumexp, one fused Triton kernel.

    Args:
        q, k, v: (B, H, N, D) float16, bfloat16 or float32 on CUDA (or CPU tensors under
            TRITON_INTERPRET=1); D a power of two >= 16.
        causal: key j is visible to query i iff j <= i.
        BLOCK_M, BLOCK_N: query and key rows per tile, powers of two >= 16.

    Returns:
        (o, lse): o (B, H, N, D) in q's dtype; lse (B, H, N) float32, L = m + log(l) in natural
        log (the row's logsumexp of the scaled, masked scores).
    """
    B, H, N, D = q.shape
    assert k.shape == q.shape and v.shape == q.shape, "q, k and v must all be (B, H, N, D)"
    assert D >= 16 and D & (D - 1) == 0, f"D must be a power of two >= 16 for tl.dot, got {D}"
    q, k, v = (t.reshape(B * H, N, D).contiguous() for t in (q, k, v))
    o = torch.empty_like(q)
    lse = torch.empty((B * H, N), device=q.device, dtype=torch.float32)
    grid = (triton.cdiv(N, BLOCK_M), B * H)
    _flash_fwd[grid](q, k, v, o, lse, N, q.stride(0), q.stride(1), LOG2E / D ** 0.5,
                     CAUSAL=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D,
                     num_warps=num_warps, num_stages=num_stages)
    return o.reshape(B, H, N, D), lse.reshape(B, H, N)


# ------------------------------------------------------------------------------ backward


@triton.jit
def _bwd_preprocess(O, DO, Delta, N, stride_bh, stride_n,
                    BLOCK_M: tl.constexpr, D: tl.constexpr):
    """D = rowsum(dO * O), one number per query row."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    base = pid_bh * stride_bh
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    offs = base + rows[:, None] * stride_n + dims[None, :]
    o = tl.load(O + offs, mask=rows[:, None] < N, other=0.0).to(tl.float32)
    do = tl.load(DO + offs, mask=rows[:, None] < N, other=0.0).to(tl.float32)
    tl.store(Delta + pid_bh * N + rows, tl.sum(o * do, axis=1), mask=rows < N)


@triton.jit
def _bwd_dkdv(Q, K, V, DO, LSE, Delta, DK, DV, DQ, N, stride_bh, stride_n, scale,
              CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              D: tl.constexpr):
    """dK and dV of one key block, and its share of dQ: loop over the query blocks that see it."""
    pid_n = tl.program_id(0)            # which key block
    pid_bh = tl.program_id(1)
    base = pid_bh * stride_bh
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    dims = tl.arange(0, D)
    k = tl.load(K + base + cols[:, None] * stride_n + dims[None, :],
                mask=cols[:, None] < N, other=0.0)                       # (BLOCK_N, D)
    v = tl.load(V + base + cols[:, None] * stride_n + dims[None, :],
                mask=cols[:, None] < N, other=0.0)
    dk = tl.zeros([BLOCK_N, D], tl.float32)
    dv = tl.zeros([BLOCK_N, D], tl.float32)
    qk_scale = scale * 1.4426950408889634
    # causal: query blocks entirely above the diagonal (rows < this block's first key) are skipped
    lo = (pid_n * BLOCK_N) // BLOCK_M * BLOCK_M if CAUSAL else 0
    for start in range(lo, N, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        q = tl.load(Q + base + rows[:, None] * stride_n + dims[None, :],
                    mask=rows[:, None] < N, other=0.0)                   # (BLOCK_M, D)
        do = tl.load(DO + base + rows[:, None] * stride_n + dims[None, :],
                     mask=rows[:, None] < N, other=0.0)
        lse = tl.load(LSE + pid_bh * N + rows, mask=rows < N, other=0.0)
        delta = tl.load(Delta + pid_bh * N + rows, mask=rows < N, other=0.0)
        # recompute instead of remember: P = exp(S - L), from the L the forward saved
        s = tl.dot(q, tl.trans(k))                                       # (BLOCK_M, BLOCK_N)
        p = tl.exp2(s * qk_scale - lse[:, None] * 1.4426950408889634)
        valid = (rows[:, None] < N) & (cols[None, :] < N)
        if CAUSAL:
            valid = valid & (cols[None, :] <= rows[:, None])
        p = tl.where(valid, p, 0.0)
        dv += tl.dot(tl.trans(p.to(do.dtype)), do)                       # dV = P^T dO
        dp = tl.dot(do, tl.trans(v))                                     # dP = dO V^T
        ds = p * (dp - delta[:, None])                                   # dS = P * (dP - D)
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q)                        # dK = dS^T Q
        # dQ of these rows, this key block's share: added atomically (other key blocks'
        # programs add into the same rows at the same time), in float32
        tl.atomic_add(DQ + base + rows[:, None] * stride_n + dims[None, :],
                      tl.dot(ds.to(k.dtype), k) * scale, mask=rows[:, None] < N)
    dk = dk * scale                                                      # S = scale * Q K^T
    tl.store(DK + base + cols[:, None] * stride_n + dims[None, :],
             dk.to(DK.dtype.element_ty), mask=cols[:, None] < N)
    tl.store(DV + base + cols[:, None] * stride_n + dims[None, :],
             dv.to(DV.dtype.element_ty), mask=cols[:, None] < N)


def flash_bwd(q, k, v, o, lse, do, causal=False, BLOCK_M=32, BLOCK_N=32, num_warps=4,
              num_stages=2):
    """Gradients of flash_fwd: (dq, dk, dv), each (B, H, N, D) in q's dtype.

    o, lse: what flash_fwd(q, k, v, causal) returned; do: the gradient of the loss with respect
    to o. Two kernels: D = rowsum(dO * O); dK, dV and (atomically) dQ per key block.
    """
    B, H, N, D = q.shape
    q, k, v, o, do = (t.reshape(B * H, N, D).contiguous() for t in (q, k, v, o, do))
    lse = lse.reshape(B * H, N).contiguous()
    delta = torch.empty((B * H, N), device=q.device, dtype=torch.float32)
    dq = torch.zeros(q.shape, device=q.device, dtype=torch.float32)   # summed into: zeros
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    scale = 1.0 / D ** 0.5
    _bwd_preprocess[(triton.cdiv(N, BLOCK_M), B * H)](o, do, delta, N, o.stride(0), o.stride(1),
                                                      BLOCK_M=BLOCK_M, D=D)
    _bwd_dkdv[(triton.cdiv(N, BLOCK_N), B * H)](
        q, k, v, do, lse, delta, dk, dv, dq, N, q.stride(0), q.stride(1), scale,
        CAUSAL=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D,
        num_warps=num_warps, num_stages=num_stages)
    dq = dq.to(q.dtype)
    return tuple(t.reshape(B, H, N, D) for t in (dq, dk, dv))


# ------------------------------------------------------------------------------ autograd


class FlashAttention(torch.autograd.Function):
    """flash_fwd forward, flash_bwd backward; saves q, k, v, o and lse (nothing N x N)."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        o, lse = flash_fwd(q, k, v, causal=causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal = causal
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = flash_bwd(q, k, v, o, lse, do, causal=ctx.causal)
        return dq, dk, dv, None


def flash_attention(q, k, v, causal=False):
    """Attention with a FlashAttention backward: flash_attention(q, k, v, causal).backward(g)."""
    return FlashAttention.apply(q, k, v, causal)


# ------------------------------------------------------------------------------ self-test


def attention_eager(q, k, v, causal=False):
    """(B, H, N, D) attention in PyTorch, N x N intermediates: the reference."""
    s = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    if causal:
        N = q.shape[-2]
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit("No GPU found: run on the CPU with TRITON_INTERPRET=1 "
                 "python solutions/flash_backward.py")
    torch.manual_seed(0)
    for causal in (False, True):
        for N in (45, 100):
            q, k, v = (torch.randn(2, 2, N, 32, device=device).half() for _ in range(3))
            g = torch.randn(2, 2, N, 32, device=device).half()
            leaves = [t.double().requires_grad_() for t in (q, k, v)]
            attention_eager(*leaves, causal=causal).backward(g.double())
            mine = [t.clone().requires_grad_() for t in (q, k, v)]
            flash_attention(*mine, causal=causal).backward(g)
            errs = [(m.grad.double() - r.grad).abs().max().item() for m, r in zip(mine, leaves)]
            print(f"  causal={causal!s:5} N={N:4d}: dq, dk, dv max abs error "
                  + ", ".join(f"{e:.1e}" for e in errs))
