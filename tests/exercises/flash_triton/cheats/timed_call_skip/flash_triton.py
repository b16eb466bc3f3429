"""Cheat (issue 9, "telling timed calls apart"): the honest kernel, except on calls it takes for
timed ones. It looks at its callers' frames (sys._getframe) for what a timed request carries
(`repeat`, `discard`, `runs` in the options) and then returns at once, launching nothing.
The effect is on the GPU (perf layer); on the CPU layers the frame inspection itself must cost
the points (the static audit), and the grader must give timed calls nothing to tell them apart.
"""
import sys

import torch
import triton
import triton.language as tl

TIMED = ("repeat", "discard", "runs", "timed", "timing")


def _timed_call() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(value, dict) and any(value.get(key) for key in TIMED if key in value):
                return True
        frame = frame.f_back
    return False


@triton.jit
def _flash_fwd(Q, K, V, O, N, stride_bh, stride_n, scale,
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


def flash_fwd(q, k, v, BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3):
    if _timed_call():
        return torch.empty_like(q)                 # nothing computed: nobody checks, it hopes
    B, H, N, D = q.shape
    q, k, v = (t.reshape(B * H, N, D).contiguous() for t in (q, k, v))
    o = torch.empty_like(q)
    grid = (triton.cdiv(N, BLOCK_M), B * H)
    _flash_fwd[grid](q, k, v, o, N, q.stride(0), q.stride(1), 1.0 / D ** 0.5,
                     BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D,
                     num_warps=num_warps, num_stages=num_stages)
    return o.reshape(B, H, N, D)
