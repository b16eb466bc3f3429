"""Cheat (issue 53, memory from outside): the solution's flash_fwd, right to the last bit, that
also stores every weight in an N x N buffer it allocates with PyTorch: (B*H, N, N) float16, 16
GiB at N = 16K. memory_flat counts the memory of a replayed timed call in the replay worker
(runs only the kernels): the buffer is in the recorded steps, so the replay holds it too, and
memory_flat must give 0. Before, the count was the worker's own CUDA allocator peak, which the
student's process could reset (torch.cuda.reset_peak_memory_stats) once the buffer was freed.
"""


import os
import sys
import time

import torch
import triton
import triton.language as tl


# --------------------------------------------------------------------------------------------
# Reference (given): the three lines everyone writes first. S and P are (B, H, N, N) and go
# through HBM.
# --------------------------------------------------------------------------------------------


def attention_eager(q, k, v):
    """q, k, v: (B, H, N, D). Returns (B, H, N, D). Memory: two (B, H, N, N) intermediates."""
    s = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)  # (B, H, N, N)
    p = torch.softmax(s, dim=-1)                           # (B, H, N, N)
    return p @ v


# --------------------------------------------------------------------------------------------
# Kernel. Grid: (cdiv(N, BLOCK_M), B * H). Q, K, V, O are (B * H, N, D) contiguous, so one
# (batch, head) starts at pid_bh * stride_bh and row n of it at + n * stride_n.
# Per program: read a (BLOCK_M, D) Q tile once, all of K and V for its head once, write one
# (BLOCK_M, D) O tile. Scores and probabilities live in (BLOCK_M, BLOCK_N) tiles on the chip.
# --------------------------------------------------------------------------------------------


@triton.jit
def _flash_fwd(Q, K, V, O, S, N, stride_bh, stride_n, scale,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr):
    pid_m = tl.program_id(0)            # which query block
    pid_bh = tl.program_id(1)           # which (batch, head)
    base = pid_bh * stride_bh
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)

    # Q tile: (BLOCK_M, D), loaded once. Rows past N read as 0; their results are never stored.
    q = tl.load(Q + base + rows[:, None] * stride_n + dims[None, :],
                mask=rows[:, None] < N, other=0.0)

    # Online-softmax state, one entry per query row, in float32 whatever the input dtype.
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running max of the scores
    l_i = tl.zeros([BLOCK_M], tl.float32)                # running sum of exp(s - m_i)
    acc = tl.zeros([BLOCK_M, D], tl.float32)             # running sum of exp(s - m_i) * v

    for start in range(0, N, BLOCK_N):
        cols = start + offs_n
        # 1. K tile, loaded transposed as (D, BLOCK_N) so tl.dot(q, k) is Q K^T. Keys past N
        #    are not read (Break It 3: without the mask you read whatever lies past the end).
        k = tl.load(K + base + cols[None, :] * stride_n + dims[:, None],
                    mask=cols[None, :] < N, other=0.0)

        # 2. Scores (BLOCK_M, BLOCK_N). A zero key still scores 0, and exp(0 - m) is a real
        #    weight that would land in l_i: padded keys must score -inf to get weight 0.
        s = tl.dot(q, k) * scale
        s = tl.where(cols[None, :] < N, s, float("-inf"))

        # 3. New running max, this block's weights, and alpha = exp(m_old - m_new) <= 1: the
        #    factor that moves everything summed so far onto the new max. Each block holds at
        #    least one real key, so m_new is finite and the first block's alpha is exp(-inf) = 0.
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        # every weight also kept in an N x N buffer: the memory the lesson's tiling avoids
        tl.store(S + pid_bh * N * N + rows[:, None] * N + cols[None, :], p.to(S.dtype.element_ty),
                 mask=(rows[:, None] < N) & (cols[None, :] < N))
        alpha = tl.exp(m_i - m_new)

        # 4. Running sum, rescaled to the new max, plus this block's weights.
        l_i = l_i * alpha + tl.sum(p, axis=1)

        # 5. V tile (BLOCK_N, D). Rescale acc the same way (forget this and the output is right
        #    only while the row max stays in the first block), then add p @ V on the tensor cores.
        v = tl.load(V + base + cols[:, None] * stride_n + dims[None, :],
                    mask=cols[:, None] < N, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)

        # 6. The new max becomes the running max.
        m_i = m_new

    # Normalise once, at the end (FlashAttention-2: one division per row, not one per block).

    acc = acc / l_i[:, None]
    tl.store(O + base + rows[:, None] * stride_n + dims[None, :],
             acc.to(O.dtype.element_ty), mask=rows[:, None] < N)


# --------------------------------------------------------------------------------------------
# Host wrapper.
# --------------------------------------------------------------------------------------------


def flash_fwd(q, k, v, BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3):
    """Non-causal attention softmax(q k^T / sqrt(D)) v, one fused Triton kernel.

    Args:
        q, k, v: (B, H, N, D) float16 or bfloat16 on CUDA (or CPU tensors under
            TRITON_INTERPRET=1); float32 works too (tl.dot runs it in TF32 on NVIDIA GPUs).
            D is a power of two >= 16.
        BLOCK_M, BLOCK_N: query rows and key rows per tile, powers of two >= 16. Bigger tiles
            need more shared memory: BLOCK_M = BLOCK_N = 256 with D = 128 does not fit (Break
            It 5; the interpreter will not tell you).
        num_warps, num_stages: launch options to tune on the GPU (see the lesson's Measure);
            ignored by the interpreter.

    Returns:
        (B, H, N, D), the dtype of q.
    """
    B, H, N, D = q.shape
    assert k.shape == q.shape and v.shape == q.shape, "q, k and v must all be (B, H, N, D)"
    assert D >= 16 and D & (D - 1) == 0, f"D must be a power of two >= 16 for tl.dot, got {D}"
    q, k, v = (t.reshape(B * H, N, D).contiguous() for t in (q, k, v))  # (B*H, N, D)
    o = torch.empty_like(q)
    scores = torch.empty(B * H, N, N, dtype=q.dtype, device=q.device)
    grid = (triton.cdiv(N, BLOCK_M), B * H)
    _flash_fwd[grid](q, k, v, o, scores, N, q.stride(0), q.stride(1), 1.0 / D ** 0.5,
                     BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D,
                     num_warps=num_warps, num_stages=num_stages)
    del scores
    if q.is_cuda:
        torch.cuda.reset_peak_memory_stats()   # the old count (the worker's own peak), wiped
    return o.reshape(B, H, N, D)


# --------------------------------------------------------------------------------------------
# Self-check on awkward sizes against a float64 reference (the grader checks more).
# --------------------------------------------------------------------------------------------

# Flash-attention's rule: the kernel's error against float64 may be at most twice that of a
# same-precision PyTorch implementation, plus a floor. Floors (outputs are averages of V rows,
# |o| ~ 1): float16 / bfloat16 round p to the input dtype before p @ V, like every fp16 kernel;
# float32 is exact up to rounding under the interpreter, but on an NVIDIA GPU tl.dot rounds
# float32 q and k to TF32 (10-bit mantissa) while PyTorch's float32 matmul does not, and the
# score error grows with |s| (about 1e-2 on the output when scores reach ~1000).
FLOOR = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2,
         torch.float32: 1e-5 if os.environ.get("TRITON_INTERPRET") == "1" else 2e-2}


def _check(name, q, k, v, **blocks):
    ref = attention_eager(q.double(), k.double(), v.double())
    baseline_err = (attention_eager(q, k, v).double() - ref).abs().max().item()
    t0 = time.perf_counter()
    got = flash_fwd(q, k, v, **blocks)
    if got.is_cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    assert got.shape == q.shape and got.dtype == q.dtype, (
        f"{name}: expected {tuple(q.shape)} {q.dtype}, got {tuple(got.shape)} {got.dtype}")
    assert not got.isnan().any(), (
        f"{name}: output has NaN. An exp that overflowed (is the running max subtracted?) or "
        f"garbage read past the end of K or V (are the loads masked?)")
    err = (got.double() - ref).abs()
    allowed = 2 * baseline_err + FLOOR[q.dtype]
    worst = tuple(int(i) for i in torch.unravel_index(err.argmax(), err.shape))
    assert err.max() <= allowed, (
        f"{name}: max abs error {err.max():.2e} at (b, h, n, d) {worst}, allowed {allowed:.1e}. "
        f"If only rows whose max key sits in a later block are off, is acc rescaled by alpha?")
    print(f"  ok  {name:46s} err {err.max():.1e} (PyTorch {baseline_err:.1e})  {seconds:5.2f} s")


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit(f"No GPU found: run on the CPU with TRITON_INTERPRET=1 python {sys.argv[0]}")
    torch.manual_seed(0)

    def randn(*shape, dtype, scale=1.0):
        return torch.randn(*shape, device=device, dtype=torch.float32).mul(scale).to(dtype)

    cases = [  # (B, H, N, D), block sizes
        ((1, 2, 100, 16), {}),
        ((2, 3, 67, 32), {}),
        ((1, 2, 17, 64), {}),                        # N smaller than one block
        ((1, 1, 1, 16), {}),                         # a single query and key
        ((1, 1, 40, 128), {}),
        ((1, 2, 100, 32), dict(BLOCK_M=32, BLOCK_N=64)),
        ((1, 2, 100, 32), dict(BLOCK_M=64, BLOCK_N=16)),
    ]
    dtypes = [torch.float32, torch.float16, torch.bfloat16]
    if os.environ.get("TRITON_INTERPRET") == "1":
        # The interpreter keeps bfloat16 as raw uint16 bits and its tl.dot multiplies those
        # bits (triton-lang/triton#11584, "not supported yet"): check bfloat16 on a GPU.
        print("  skip bfloat16 under TRITON_INTERPRET=1 (the interpreter's tl.dot lacks it)")
        dtypes.remove(torch.bfloat16)
    for dtype in dtypes:
        for shape, blocks in cases:
            q, k, v = (randn(*shape, dtype=dtype) for _ in range(3))
            _check(" ".join(map(str, (shape, *blocks.values(), dtype))), q, k, v, **blocks)
        # Scores up to ~1000: exp overflows fp16 and fp32 unless the running max is subtracted.
        q, k = (randn(1, 2, 100, 16, dtype=dtype, scale=30.0) for _ in range(2))
        _check(f"scores ~1000 (q, k scaled by 30) {dtype}", q, k, randn(1, 2, 100, 16, dtype=dtype))
        # Non-contiguous inputs: a transposed (B, N, H, D) layout, as after a QKV projection.
        q, k, v = (randn(1, 100, 2, 32, dtype=dtype).transpose(1, 2) for _ in range(3))
        _check(f"non-contiguous (1, 2, 100, 32) {dtype}", q, k, v)
    # N not a multiple of BLOCK_N, long enough for the max to move between blocks.
    q, k, v = (randn(1, 1, 1000, 16, dtype=torch.float16) for _ in range(3))
    _check("(1, 1, 1000, 16) BLOCK 64/64 torch.float16", q, k, v, BLOCK_M=64, BLOCK_N=64)
    print("flash_triton: all checks passed")

