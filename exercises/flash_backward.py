"""Exercise flash_backward (extension track): causal FlashAttention that also returns the
logsumexp L, its backward pass in Triton, and an autograd.Function around both.

Lesson: FlashAttention and kernels, "FlashAttention's forward pass" (step 4: "Also writes one
extra number per row, the logsumexp ... L = m + log(l), for the backward pass"), "The backward
pass: recompute instead of remember" (P = e^(S - L); the D trick) and FlashAttention-2 ("skips
blocks that are fully masked out for causal attention").

Your job, in this order (each wrapper raises NotImplementedError until you delete that line):
  1. `_fwd_block` and `_flash_fwd`: the core exercise's forward, plus causal masking, the key loop
     stopping at the diagonal, and L = m + log(l) stored per row. Then `flash_fwd`.
  2. `_bwd_preprocess`, `_bwd_dkdv`, `_bwd_dq`: the backward, tile by tile. Then `flash_bwd`.
  3. `FlashAttention.forward` / `backward`, so that flash_attention(q, k, v, causal).backward(g)
     works.
Causal: key j is visible to query i iff j <= i. Scale: 1/sqrt(D). Nothing N x N, ever.

You may compute with exp2 (LOG2E folded into the scale, as the solution does) or with exp; the L
you return is in natural log either way.

Run:
  TRITON_INTERPRET=1 python exercises/flash_backward.py   # on a CPU, with CPU tensors (slow)
  python exercises/flash_backward.py                      # on a CUDA machine
  make check EX=flash_backward                            # the grader's checks
"""

import os
import sys

import torch
import triton
import triton.language as tl

# log2(e): exp(x) = exp2(x * LOG2E); and ln(2) = 0.6931471805599453: log(x) = log2(x) * ln(2).
# Write them as literals inside a kernel (a @triton.jit function reads only constexpr globals).
LOG2E = 1.4426950408889634


# ------------------------------------------------------------------------------ forward


@triton.jit
def _fwd_block(q, m_i, l_i, acc, K, V, base, stride_n, rows, start, N, qk_scale,
               MASK: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr):
    """One key block of the online softmax (the core exercise's loop body). qk_scale is
    1/sqrt(D), times LOG2E if you use exp2. Returns the new (m_i, l_i, acc)."""
    cols = start + tl.arange(0, BLOCK_N)
    dims = tl.arange(0, D)
    # 1. load the K tile transposed, (D, BLOCK_N), masked on cols < N; s = tl.dot(q, k) * qk_scale
    # 2. if MASK (only the blocks that cross the diagonal or the end of the keys): scores of
    #    keys that do not exist (cols >= N) and, if CAUSAL, of keys above the diagonal (key j
    #    visible to query i iff j <= i) become -inf with tl.where
    # 3. "update m, l, o with the block rule": m_new, p, alpha; l_i = l_i * alpha + rowsum(p)
    # 4. load the V tile (BLOCK_N, D), masked; acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    ...
    return m_i, l_i, acc


@triton.jit
def _flash_fwd(Q, K, V, O, LSE, N, stride_bh, stride_n, qk_scale,
               CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               D: tl.constexpr):
    pid_m = tl.program_id(0)            # which query block
    pid_bh = tl.program_id(1)           # which (batch, head)
    base = pid_bh * stride_bh
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    # "Loads its Q block (Br x d) from HBM into SRAM, once."
    q = tl.load(Q + base + rows[:, None] * stride_n + dims[None, :],
                mask=rows[:, None] < N, other=0.0)
    # "Sets m = -inf, l = 0, o = 0 for each of its Br rows."
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)

    # 5. the loop bounds. Non-causal: every key block, the last one masked. Causal ("skips
    #    blocks that are fully masked out"): the key blocks wholly left of this query block need
    #    no mask; the blocks that cross the diagonal are masked; the loop stops at
    #    min((pid_m + 1) * BLOCK_M, N), so blocks above the diagonal are never loaded.
    #    Call _fwd_block(..., MASK=False, ...) for the first kind and MASK=True for the second.
    ...

    # 6. "divides o by l and writes the Br x d output block", masked on rows < N
    # 7. "Also writes one extra number per row": L = m + log(l), natural log (with exp2:
    #    (m_i + log2(l_i)) * ln(2)), stored at LSE + pid_bh * N + rows, masked on rows < N
    ...


def flash_fwd(q, k, v, causal=False, BLOCK_M=64, BLOCK_N=64):
    """softmax(q k^T / sqrt(D) [+ causal mask]) v and its logsumexp.

    Args:
        q, k, v: (B, H, N, D) float16, bfloat16 or float32 (CPU tensors under TRITON_INTERPRET=1);
            D a power of two >= 16.
        causal: key j is visible to query i iff j <= i.
        BLOCK_M, BLOCK_N: query and key rows per tile, powers of two >= 16.

    Returns:
        (o, lse): o (B, H, N, D) in q's dtype; lse (B, H, N) float32, L = m + log(l).
    """
    raise NotImplementedError("TODO(flash_backward): _fwd_block and _flash_fwd - the online "
                              "softmax, causal loop bounds and masks, L = m + log(l); "
                              "then delete this line")
    B, H, N, D = q.shape
    q, k, v = (t.reshape(B * H, N, D).contiguous() for t in (q, k, v))
    o = torch.empty_like(q)
    lse = torch.empty((B * H, N), device=q.device, dtype=torch.float32)
    grid = (triton.cdiv(N, BLOCK_M), B * H)
    _flash_fwd[grid](q, k, v, o, lse, N, q.stride(0), q.stride(1), LOG2E / D ** 0.5,
                     CAUSAL=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D)
    return o.reshape(B, H, N, D), lse.reshape(B, H, N)


# ------------------------------------------------------------------------------ backward


@triton.jit
def _bwd_preprocess(O, DO, Delta, N, stride_bh, stride_n,
                    BLOCK_M: tl.constexpr, D: tl.constexpr):
    """The D trick: "D = rowsum(dO o O)  # one number per query row, computed once"."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    base = pid_bh * stride_bh
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    # 8. load the O and dO tiles (masked on rows < N), D = row sum of o * do in float32, stored
    #    at Delta + pid_bh * N + rows (masked)
    ...


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
    # 9. loop over the query blocks, BLOCK_M rows at a time (causal: start at the query block
    #    that holds this block's first key; the ones before see none of it). For each:
    #    load q, do, L and D of those rows (masked); "recompute S = Q K^T for the tile, and
    #    rebuild the exact probabilities as P = e^(S - L)" (no running max: L is the answer),
    #    P = 0 where the key or row does not exist or (causal) j > i;
    #    "dV += P^T dO"; "dP = dO V^T"; "dS = P o (dP - D)"; "dK += dS^T Q"
    # 10. "dK += dS^T Q * scale": the scale 1/sqrt(D) once at the end; store dK and dV (masked)
    ...


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
    # 11. load q, do, L and D of these rows (masked); loop over the key blocks (causal: stop at
    #     the diagonal, min((pid_m + 1) * BLOCK_M, N)): P = e^(S - L) masked as in 9,
    #     dP = dO V^T, dS = P o (dP - D), "dQ += dS K * scale"; store dQ (masked)
    ...


def flash_bwd(q, k, v, o, lse, do, causal=False, BLOCK_M=32, BLOCK_N=32):
    """Gradients of flash_fwd: (dq, dk, dv), each (B, H, N, D) in q's dtype.

    o, lse: what flash_fwd(q, k, v, causal) returned; do: the gradient with respect to o.
    """
    raise NotImplementedError("TODO(flash_backward): _bwd_preprocess, _bwd_dkdv and _bwd_dq - "
                              "recompute P = exp(S - L), the D trick, dV, dK, dQ; "
                              "then delete this line")
    B, H, N, D = q.shape
    q, k, v, o, do = (t.reshape(B * H, N, D).contiguous() for t in (q, k, v, o, do))
    lse = lse.reshape(B * H, N).contiguous()
    delta = torch.empty((B * H, N), device=q.device, dtype=torch.float32)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    scale = 1.0 / D ** 0.5
    _bwd_preprocess[(triton.cdiv(N, BLOCK_M), B * H)](o, do, delta, N, o.stride(0), o.stride(1),
                                                      BLOCK_M=BLOCK_M, D=D)
    _bwd_dkdv[(triton.cdiv(N, BLOCK_N), B * H)](
        q, k, v, do, lse, delta, dk, dv, N, q.stride(0), q.stride(1), scale,
        CAUSAL=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D)
    _bwd_dq[(triton.cdiv(N, BLOCK_M), B * H)](
        q, k, v, do, lse, delta, dq, N, q.stride(0), q.stride(1), scale,
        CAUSAL=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D)
    return tuple(t.reshape(B, H, N, D) for t in (dq, dk, dv))


# ------------------------------------------------------------------------------ autograd


class FlashAttention(torch.autograd.Function):
    """flash_fwd forward, flash_bwd backward; saves q, k, v, o and L (nothing N x N)."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        # 12. o, lse = flash_fwd(...); ctx.save_for_backward(q, k, v, o, lse); remember causal
        raise NotImplementedError("TODO(flash_backward): FlashAttention.forward - flash_fwd, "
                                  "save q, k, v, o and L")

    @staticmethod
    def backward(ctx, do):
        # 13. flash_bwd on the saved tensors; one gradient per input of forward (None for causal)
        raise NotImplementedError("TODO(flash_backward): FlashAttention.backward - flash_bwd, "
                                  "return (dq, dk, dv, None)")


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
                 "python exercises/flash_backward.py")
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
