# BEGIN SOLUTION
"""FlashAttention forward with the logsumexp, causal masking, and the backward pass, in Triton
(solution; extension track).

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
  - one program per key block computes dK and dV (looping over the query blocks), one program
    per query block computes dQ (looping over the key blocks): every output has one writer, no
    atomics.

Internally the exponentials are exp2 with log2(e) folded into the scale (what GPUs compute
natively); the L returned is in natural log: L = (m2 + log2(l)) * ln(2).

Run:
  python solutions/flash_backward.py                      # on a CUDA machine
  TRITON_INTERPRET=1 python solutions/flash_backward.py   # on a CPU, with CPU tensors (slow)
"""
# END SOLUTION
# BEGIN STUB
# """Exercise flash_backward (extension track): causal FlashAttention that also returns the
# logsumexp L, its backward pass in Triton, and an autograd.Function around both.
#
# Lesson: FlashAttention and kernels, "FlashAttention's forward pass" (step 4: "Also writes one
# extra number per row, the logsumexp ... L = m + log(l), for the backward pass"), "The backward
# pass: recompute instead of remember" (P = e^(S - L); the D trick) and FlashAttention-2 ("skips
# blocks that are fully masked out for causal attention").
#
# Your job, in this order (each wrapper raises NotImplementedError until you delete that line):
#   1. `_fwd_block` and `_flash_fwd`: the core exercise's forward, plus causal masking, the key loop
#      stopping at the diagonal, and L = m + log(l) stored per row. Then `flash_fwd`.
#   2. `_bwd_preprocess`, `_bwd_dkdv`, `_bwd_dq`: the backward, tile by tile. Then `flash_bwd`.
#   3. `FlashAttention.forward` / `backward`, so that flash_attention(q, k, v, causal).backward(g)
#      works.
# Causal: key j is visible to query i iff j <= i. Scale: 1/sqrt(D). Nothing N x N, ever.
#
# You may compute with exp2 (LOG2E folded into the scale, as the solution does) or with exp; the L
# you return is in natural log either way.
#
# Run:
#   TRITON_INTERPRET=1 python exercises/flash_backward.py   # on a CPU, with CPU tensors (slow)
#   python exercises/flash_backward.py                      # on a CUDA machine
#   make check EX=flash_backward                            # the grader's checks
# """
# END STUB

import os
import sys

import torch
import triton
import triton.language as tl

# log2(e): exp(x) = exp2(x * LOG2E); and ln(2) = 0.6931471805599453: log(x) = log2(x) * ln(2).
# BEGIN SOLUTION
# The kernels write both as literals (a @triton.jit function reads only constexpr globals).
# END SOLUTION
# BEGIN STUB
# # Write them as literals inside a kernel (a @triton.jit function reads only constexpr globals).
# END STUB
LOG2E = 1.4426950408889634


# ------------------------------------------------------------------------------ forward


@triton.jit
def _fwd_block(q, m_i, l_i, acc, K, V, base, stride_n, rows, start, N, qk_scale,
               MASK: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr):
    # BEGIN SOLUTION
    """One key block of the online softmax, in log2 units (qk_scale holds log2(e))."""
    # END SOLUTION
    # BEGIN STUB
    # """One key block of the online softmax (the core exercise's loop body). qk_scale is
    # 1/sqrt(D), times LOG2E if you use exp2. Returns the new (m_i, l_i, acc)."""
    # END STUB
    cols = start + tl.arange(0, BLOCK_N)
    dims = tl.arange(0, D)
    # BEGIN SOLUTION
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
    # END SOLUTION
    # BEGIN STUB
    # # 1. load the K tile transposed, (D, BLOCK_N), masked on cols < N; s = tl.dot(q, k) * qk_scale
    # # 2. if MASK (only the blocks that cross the diagonal or the end of the keys): scores of
    # #    keys that do not exist (cols >= N) and, if CAUSAL, of keys above the diagonal (key j
    # #    visible to query i iff j <= i) become -inf with tl.where
    # # 3. "update m, l, o with the block rule": m_new, p, alpha; l_i = l_i * alpha + rowsum(p)
    # # 4. load the V tile (BLOCK_N, D), masked; acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    # ...
    # return m_i, l_i, acc
    # END STUB


@triton.jit
def _flash_fwd(Q, K, V, O, LSE, N, stride_bh, stride_n, qk_scale,
               CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               D: tl.constexpr):
    pid_m = tl.program_id(0)            # which query block
    pid_bh = tl.program_id(1)           # which (batch, head)
    base = pid_bh * stride_bh
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    # BEGIN STUB
    # # "Loads its Q block (Br x d) from HBM into SRAM, once."
    # END STUB
    q = tl.load(Q + base + rows[:, None] * stride_n + dims[None, :],
                mask=rows[:, None] < N, other=0.0)
    # BEGIN SOLUTION

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
    # END SOLUTION
    # BEGIN STUB
    # # "Sets m = -inf, l = 0, o = 0 for each of its Br rows."
    # m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    # l_i = tl.zeros([BLOCK_M], tl.float32)
    # acc = tl.zeros([BLOCK_M, D], tl.float32)
    #
    # # 5. the loop bounds. Non-causal: every key block, the last one masked. Causal ("skips
    # #    blocks that are fully masked out"): the key blocks wholly left of this query block need
    # #    no mask; the blocks that cross the diagonal are masked; the loop stops at
    # #    min((pid_m + 1) * BLOCK_M, N), so blocks above the diagonal are never loaded.
    # #    Call _fwd_block(..., MASK=False, ...) for the first kind and MASK=True for the second.
    # ...
    #
    # # 6. "divides o by l and writes the Br x d output block", masked on rows < N
    # # 7. "Also writes one extra number per row": L = m + log(l), natural log (with exp2:
    # #    (m_i + log2(l_i)) * ln(2)), stored at LSE + pid_bh * N + rows, masked on rows < N
    # ...
    # END STUB


# BEGIN SOLUTION
def default_tiles(q, backward=False):
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) for q's device, chosen by its shared memory.

    Measured on an H200 (B=1, H=32, D=128, fp16; `python -m tools.tune_flash_backward`): the
    forward at 128 x 64 with 8 warps and 3 stages runs at ~460 TFLOP/s, 64 x 64 with 4 warps at
    ~425; the backward's kernels are fastest at 64 x 64, 4 warps, 2 stages. Compiled for a GB10 (DGX
    Spark, 99 KB = 101376 bytes per block), 128 x 64 x 3 stages needs 98304 bytes: GPUs with
    less than 200 KB per block get 64 x 64 (57344 bytes with 2 stages), which leaves room.
    """
    if backward:
        return 64, 64, 4, 2
    if q.device.type == "cuda":
        smem = getattr(torch.cuda.get_device_properties(q.device), "shared_memory_per_block_optin", 0)
        if smem >= 200 * 1024:
            return 128, 64, 8, 3
    return 64, 64, 4, 2


def flash_fwd(q, k, v, causal=False, BLOCK_M=None, BLOCK_N=None, num_warps=None, num_stages=None):
    """softmax(q k^T / sqrt(D) [+ causal mask]) v and its logsumexp, one fused Triton kernel.

    Args:
        q, k, v: (B, H, N, D) float16, bfloat16 or float32 on CUDA (or CPU tensors under
            TRITON_INTERPRET=1); D a power of two >= 16.
        causal: key j is visible to query i iff j <= i.
        BLOCK_M, BLOCK_N, num_warps, num_stages: the tile; None: default_tiles(q).

    Returns:
        (o, lse): o (B, H, N, D) in q's dtype; lse (B, H, N) float32, L = m + log(l) in natural
        log (the row's logsumexp of the scaled, masked scores).
    """
# END SOLUTION
# BEGIN STUB
# def flash_fwd(q, k, v, causal=False, BLOCK_M=64, BLOCK_N=64):
#     """softmax(q k^T / sqrt(D) [+ causal mask]) v and its logsumexp.
#
#     Args:
#         q, k, v: (B, H, N, D) float16, bfloat16 or float32 (CPU tensors under TRITON_INTERPRET=1);
#             D a power of two >= 16.
#         causal: key j is visible to query i iff j <= i.
#         BLOCK_M, BLOCK_N: query and key rows per tile, powers of two >= 16.
#
#     Returns:
#         (o, lse): o (B, H, N, D) in q's dtype; lse (B, H, N) float32, L = m + log(l).
#     """
#     raise NotImplementedError("TODO(flash_backward): _fwd_block and _flash_fwd - the online "
#                               "softmax, causal loop bounds and masks, L = m + log(l); "
#                               "then delete this line")
# END STUB
    B, H, N, D = q.shape
    # BEGIN SOLUTION
    assert k.shape == q.shape and v.shape == q.shape, "q, k and v must all be (B, H, N, D)"
    assert D >= 16 and D & (D - 1) == 0, f"D must be a power of two >= 16 for tl.dot, got {D}"
    tiles = default_tiles(q)
    BLOCK_M, BLOCK_N = BLOCK_M or tiles[0], BLOCK_N or tiles[1]
    num_warps, num_stages = num_warps or tiles[2], num_stages or tiles[3]
    # END SOLUTION
    q, k, v = (t.reshape(B * H, N, D).contiguous() for t in (q, k, v))
    o = torch.empty_like(q)
    lse = torch.empty((B * H, N), device=q.device, dtype=torch.float32)
    grid = (triton.cdiv(N, BLOCK_M), B * H)
    _flash_fwd[grid](q, k, v, o, lse, N, q.stride(0), q.stride(1), LOG2E / D ** 0.5,
                     # BEGIN SOLUTION
                     CAUSAL=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D,
                     num_warps=num_warps, num_stages=num_stages)
                     # END SOLUTION
                     # BEGIN STUB
                     # CAUSAL=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D)
                     # END STUB
    return o.reshape(B, H, N, D), lse.reshape(B, H, N)


# ------------------------------------------------------------------------------ backward


@triton.jit
def _bwd_preprocess(O, DO, Delta, N, stride_bh, stride_n,
                    BLOCK_M: tl.constexpr, D: tl.constexpr):
    # BEGIN SOLUTION
    """D = rowsum(dO * O), one number per query row."""
    # END SOLUTION
    # BEGIN STUB
    # """The D trick: "D = rowsum(dO o O)  # one number per query row, computed once"."""
    # END STUB
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    base = pid_bh * stride_bh
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    # BEGIN SOLUTION
    offs = base + rows[:, None] * stride_n + dims[None, :]
    o = tl.load(O + offs, mask=rows[:, None] < N, other=0.0).to(tl.float32)
    do = tl.load(DO + offs, mask=rows[:, None] < N, other=0.0).to(tl.float32)
    tl.store(Delta + pid_bh * N + rows, tl.sum(o * do, axis=1), mask=rows < N)
    # END SOLUTION
    # BEGIN STUB
    # # 8. load the O and dO tiles (masked on rows < N), D = row sum of o * do in float32, stored
    # #    at Delta + pid_bh * N + rows (masked)
    # ...
    # END STUB


@triton.jit
def _bwd_dkdv(Q, K, V, DO, LSE, Delta, DK, DV, N, stride_bh, stride_n, scale,
              CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              D: tl.constexpr):
    """dK and dV of one key block: loop over the query blocks that see it."""
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
    # BEGIN SOLUTION
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
    dk = dk * scale                                                      # S = scale * Q K^T
    tl.store(DK + base + cols[:, None] * stride_n + dims[None, :],
             dk.to(DK.dtype.element_ty), mask=cols[:, None] < N)
    tl.store(DV + base + cols[:, None] * stride_n + dims[None, :],
             dv.to(DV.dtype.element_ty), mask=cols[:, None] < N)
    # END SOLUTION
    # BEGIN STUB
    # # 9. loop over the query blocks, BLOCK_M rows at a time (causal: start at the query block
    # #    that holds this block's first key; the ones before see none of it). For each:
    # #    load q, do, L and D of those rows (masked); "recompute S = Q K^T for the tile, and
    # #    rebuild the exact probabilities as P = e^(S - L)" (no running max: L is the answer),
    # #    P = 0 where the key or row does not exist or (causal) j > i;
    # #    "dV += P^T dO"; "dP = dO V^T"; "dS = P o (dP - D)"; "dK += dS^T Q"
    # # 10. "dK += dS^T Q * scale": the scale 1/sqrt(D) once at the end; store dK and dV (masked)
    # ...
    # END STUB


# BEGIN SOLUTION
@triton.jit
def _bwd_dq(Q, K, V, DO, LSE, Delta, DQ, N, stride_bh, stride_n, scale,
            CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            D: tl.constexpr):
    """dQ of one query block: loop over the key blocks it sees (one writer: no atomics)."""
    pid_m = tl.program_id(0)            # which query block
    pid_bh = tl.program_id(1)
    base = pid_bh * stride_bh
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    q = tl.load(Q + base + rows[:, None] * stride_n + dims[None, :],
                mask=rows[:, None] < N, other=0.0)
    do = tl.load(DO + base + rows[:, None] * stride_n + dims[None, :],
                 mask=rows[:, None] < N, other=0.0)
    lse = tl.load(LSE + pid_bh * N + rows, mask=rows < N, other=0.0)
    delta = tl.load(Delta + pid_bh * N + rows, mask=rows < N, other=0.0)
    dq = tl.zeros([BLOCK_M, D], tl.float32)
    qk_scale = scale * 1.4426950408889634
    # causal: the key loop stops at the diagonal
    hi = tl.minimum((pid_m + 1) * BLOCK_M, N) if CAUSAL else N
    for start in range(0, hi, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        k = tl.load(K + base + cols[:, None] * stride_n + dims[None, :],
                    mask=cols[:, None] < N, other=0.0)
        v = tl.load(V + base + cols[:, None] * stride_n + dims[None, :],
                    mask=cols[:, None] < N, other=0.0)
        s = tl.dot(q, tl.trans(k))
        p = tl.exp2(s * qk_scale - lse[:, None] * 1.4426950408889634)   # P = exp(S - L)
        valid = (rows[:, None] < N) & (cols[None, :] < N)
        if CAUSAL:
            valid = valid & (cols[None, :] <= rows[:, None])
        p = tl.where(valid, p, 0.0)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])                                   # dS = P * (dP - D)
        dq += tl.dot(ds.to(k.dtype), k)                                  # dQ = dS K
    dq = dq * scale
    tl.store(DQ + base + rows[:, None] * stride_n + dims[None, :],
             dq.to(DQ.dtype.element_ty), mask=rows[:, None] < N)


def flash_bwd(q, k, v, o, lse, do, causal=False, BLOCK_M=None, BLOCK_N=None, num_warps=None,
              num_stages=None):
    """Gradients of flash_fwd: (dq, dk, dv), each (B, H, N, D) in q's dtype.

    o, lse: what flash_fwd(q, k, v, causal) returned; do: the gradient of the loss with respect
    to o. Three kernels: D = rowsum(dO * O); dK, dV per key block; dQ per query block.
    """
# END SOLUTION
# BEGIN STUB
# @triton.jit
# def _bwd_dq(Q, K, V, DO, LSE, Delta, DQ, N, stride_bh, stride_n, scale,
#             CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
#             D: tl.constexpr):
#     """dQ of one query block: loop over the key blocks it sees (one writer: no atomics)."""
#     pid_m = tl.program_id(0)            # which query block
#     pid_bh = tl.program_id(1)
#     base = pid_bh * stride_bh
#     rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
#     dims = tl.arange(0, D)
#     # 11. load q, do, L and D of these rows (masked); loop over the key blocks (causal: stop at
#     #     the diagonal, min((pid_m + 1) * BLOCK_M, N)): P = e^(S - L) masked as in 9,
#     #     dP = dO V^T, dS = P o (dP - D), "dQ += dS K * scale"; store dQ (masked)
#     ...
#
#
# def flash_bwd(q, k, v, o, lse, do, causal=False, BLOCK_M=32, BLOCK_N=32):
#     """Gradients of flash_fwd: (dq, dk, dv), each (B, H, N, D) in q's dtype.
#
#     o, lse: what flash_fwd(q, k, v, causal) returned; do: the gradient with respect to o.
#     """
#     raise NotImplementedError("TODO(flash_backward): _bwd_preprocess, _bwd_dkdv and _bwd_dq - "
#                               "recompute P = exp(S - L), the D trick, dV, dK, dQ; "
#                               "then delete this line")
# END STUB
    B, H, N, D = q.shape
    # BEGIN SOLUTION
    tiles = default_tiles(q, backward=True)
    BLOCK_M, BLOCK_N = BLOCK_M or tiles[0], BLOCK_N or tiles[1]
    num_warps, num_stages = num_warps or tiles[2], num_stages or tiles[3]
    # END SOLUTION
    q, k, v, o, do = (t.reshape(B * H, N, D).contiguous() for t in (q, k, v, o, do))
    lse = lse.reshape(B * H, N).contiguous()
    delta = torch.empty((B * H, N), device=q.device, dtype=torch.float32)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    scale = 1.0 / D ** 0.5
    _bwd_preprocess[(triton.cdiv(N, BLOCK_M), B * H)](o, do, delta, N, o.stride(0), o.stride(1),
                                                      BLOCK_M=BLOCK_M, D=D)
    _bwd_dkdv[(triton.cdiv(N, BLOCK_N), B * H)](
        q, k, v, do, lse, delta, dk, dv, N, q.stride(0), q.stride(1), scale,
    # BEGIN SOLUTION
        CAUSAL=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D,
        num_warps=num_warps, num_stages=num_stages)
    _bwd_dq[(triton.cdiv(N, BLOCK_M), B * H)](
        q, k, v, do, lse, delta, dq, N, q.stride(0), q.stride(1), scale,
        CAUSAL=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D,
        num_warps=num_warps, num_stages=num_stages)
    # END SOLUTION
    # BEGIN STUB
    #     CAUSAL=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D)
    # _bwd_dq[(triton.cdiv(N, BLOCK_M), B * H)](
    #     q, k, v, do, lse, delta, dq, N, q.stride(0), q.stride(1), scale,
    #     CAUSAL=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D)
    # END STUB
    return tuple(t.reshape(B, H, N, D) for t in (dq, dk, dv))


# ------------------------------------------------------------------------------ autograd


class FlashAttention(torch.autograd.Function):
    # BEGIN SOLUTION
    """flash_fwd forward, flash_bwd backward; saves q, k, v, o and lse (nothing N x N)."""
    # END SOLUTION
    # BEGIN STUB
    # """flash_fwd forward, flash_bwd backward; saves q, k, v, o and L (nothing N x N)."""
    # END STUB

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        # BEGIN SOLUTION
        o, lse = flash_fwd(q, k, v, causal=causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal = causal
        return o
        # END SOLUTION
        # BEGIN STUB
        # # 12. o, lse = flash_fwd(...); ctx.save_for_backward(q, k, v, o, lse); remember causal
        # raise NotImplementedError("TODO(flash_backward): FlashAttention.forward - flash_fwd, "
        #                           "save q, k, v, o and L")
        # END STUB

    @staticmethod
    def backward(ctx, do):
        # BEGIN SOLUTION
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = flash_bwd(q, k, v, o, lse, do, causal=ctx.causal)
        return dq, dk, dv, None
        # END SOLUTION
        # BEGIN STUB
        # # 13. flash_bwd on the saved tensors; one gradient per input of forward (None for causal)
        # raise NotImplementedError("TODO(flash_backward): FlashAttention.backward - flash_bwd, "
        #                           "return (dq, dk, dv, None)")
        # END STUB


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
        sys.exit(f"No GPU found: run on the CPU with TRITON_INTERPRET=1 python {sys.argv[0]}")
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
