"""Trusted-side GPU helpers for the gpu and perf layers: inputs, references, comparison.

Everything here runs in the trusted process, on the same GPU as the worker. Inputs are drawn by
torch's generator from a fresh seed (`inputs.seeded`): the worker draws the same numbers itself,
so real sizes (N = 16K) need no transfer, and the reference here is computed from exactly the
values the kernel saw. Outputs come back in full and are compared on the GPU.

Timing lives in grader/judge/perf/ (timing.py: the grader's clock; timed_requests.py: the perf
layer's requests and checksums; baselines.py).
"""

from __future__ import annotations

from grader.judge.answers.compare import CheckFailed, where
from grader.judge.answers.inputs import seeded, torch_randn

MIB = 1 << 20


def _torch():
    import torch

    return torch


# ------------------------------------------------------------------------------ inputs


def seeded_inputs(rng, shape, dtype: str, count: int = 3, scale=1.0, guard: int = 0,
                  absolute: bool = False):
    """`count` tensors of `shape`: markers for the worker and the same values here on the GPU.

    scale: one number, or one per tensor (with `absolute`, a negative scale makes every value
    negative)."""
    seeds = [int(s) for s in rng.integers(0, 2**31 - 1, size=count)]
    scales = list(scale) if isinstance(scale, (list, tuple)) else [scale] * count
    markers = [seeded(shape, dtype, "cuda", s, c, guard, absolute=absolute) for s, c in zip(seeds, scales)]
    return markers, [drawn(m) for m in markers]


def seeded_marker(rng, shape, dtype: str, scale: float = 1.0):
    """One marker for the worker (it draws the tensor itself); `drawn(marker)` draws the same
    values here, when they are needed."""
    return seeded(shape, dtype, "cuda", int(rng.integers(0, 2**31 - 1)), scale)


def drawn(marker):
    """The tensor a seeded marker stands for, drawn here on the GPU (seeded_inputs' values)."""
    return torch_randn(marker.shape, marker.dtype, "cuda", marker.seed, marker.scale,
                       marker.absolute)


# --------------------------------------------------------------------------- references


def attention_reference(q, k, v, rows_per_chunk: int | None = None, causal: bool = False):
    """softmax(q k^T / sqrt(D)) v in float32 on the GPU, a block of query rows at a time.

    float32 with a max-subtracted softmax is ~1e-6 relative: far below fp16/bf16 tolerances,
    and without the N x N float64 matrix that a float64 reference would need at N = 16K."""
    return attention_lse_reference(q, k, v, causal, rows_per_chunk)[0]


def attention_lse_reference(q, k, v, causal: bool = False, rows_per_chunk: int | None = None):
    """(o, lse) in float32 on the GPU, a block of query rows at a time: o as attention_reference,
    lse the logsumexp of each row's scaled (and, with `causal`, masked: key j visible iff j <= i)
    scores, (B, H, N)."""
    t = _torch()
    B, H, N, D = q.shape
    if rows_per_chunk is None:   # keep each (B, H, rows, N) float32 score block near 1 GiB
        rows_per_chunk = max(1, min(N, (1 << 30) // max(1, B * H * N * 4)))
    kf, vf = k.float(), v.float()
    out = t.empty(q.shape, dtype=t.float32, device=q.device)
    lse = t.empty(q.shape[:-1], dtype=t.float32, device=q.device)
    scale = D ** -0.5
    for i in range(0, N, rows_per_chunk):
        s = (q[:, :, i:i + rows_per_chunk].float() @ kf.transpose(-2, -1)) * scale
        if causal:
            rows = t.arange(i, min(i + rows_per_chunk, N), device=q.device)
            s.masked_fill_(t.arange(N, device=q.device)[None, :] > rows[:, None], float("-inf"))
        lse[:, :, i:i + rows_per_chunk] = t.logsumexp(s, dim=-1)
        out[:, :, i:i + rows_per_chunk] = t.softmax(s, dim=-1) @ vf
        del s
    return out, lse


def attention_grads_reference(q, k, v, do, causal: bool = False, dtype: str = "float64"):
    """(dq, dk, dv) of attention for the output gradient `do`, in `dtype` on the GPU, a few
    (batch, head) pairs at a time (each holds its N x N scores): the analytic backward,
    dS = P * (dP - rowsum(P * dP)), with the scale on dq and dk."""
    t = _torch()
    dt = getattr(t, dtype)
    B, H, N, D = q.shape
    scale = D ** -0.5
    heads = max(1, (1 << 29) // max(1, N * N * dt.itemsize))   # ~512 MiB per N x N matrix
    grads = [t.empty(q.shape, dtype=dt, device=q.device) for _ in range(3)]
    mask = t.ones(N, N, dtype=t.bool, device=q.device).triu(1) if causal else None
    flat = [x.reshape(B * H, N, D) for x in (q, k, v, do)]
    out = [g.view(B * H, N, D) for g in grads]
    for i in range(0, B * H, heads):
        qq, kk, vv, gg = (x[i:i + heads].to(dt) for x in flat)
        s = (qq @ kk.transpose(-2, -1)) * scale
        if causal:
            s.masked_fill_(mask, float("-inf"))
        p = t.softmax(s, dim=-1)
        del s
        dp = gg @ vv.transpose(-2, -1)
        ds = p * (dp - (p * dp).sum(-1, keepdim=True))
        out[2][i:i + heads] = p.transpose(-2, -1) @ gg
        out[0][i:i + heads] = (ds @ kk) * scale
        out[1][i:i + heads] = (ds.transpose(-2, -1) @ qq) * scale
        del p, dp, ds
    return tuple(grads)


def _same_precision(q, k, v, causal: bool):
    """What both baselines share: the inputs as B*H rows of (N, D), the causal mask, and how
    many (batch, head) pairs fit at once (their N x N scores, 512 MB of float32 at most)."""
    t = _torch()
    B, H, N, D = q.shape
    heads = max(1, (1 << 29) // max(1, N * N * 4))
    mask = t.ones(N, N, dtype=t.bool, device=q.device).triu(1) if causal else None
    return t, heads, mask, [x.reshape(B * H, N, D) for x in (q, k, v)]


def _attention(t, q, k, v, mask):
    """softmax(q k^T / sqrt(D)) v in the inputs' dtype (scores, softmax and output each rounded
    to it, as eager PyTorch attention does)."""
    s = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    return t.softmax(s, dim=-1) @ v


def same_precision_grads(q, k, v, do, causal: bool = False):
    """(dq, dk, dv) of plain PyTorch attention computed in the inputs' own dtype (N x N
    intermediates, autograd), a few (batch, head) pairs at a time: the baseline of
    flash-attention's tolerance rule (error at most a multiple of this one's, plus a floor)."""
    t, heads, mask, flat = _same_precision(q, k, v, causal)
    dos = do.reshape(flat[0].shape)
    grads = [t.empty_like(flat[0]) for _ in range(3)]
    for i in range(0, flat[0].shape[0], heads):
        leaves = [x[i:i + heads].detach().clone().requires_grad_() for x in flat]
        o = _attention(t, *leaves, mask)
        for g, x in zip(grads, t.autograd.grad(o, leaves, dos[i:i + heads])):
            g[i:i + heads] = x
        del o, leaves
    return tuple(g.view(q.shape) for g in grads)


def same_precision_attention(q, k, v, causal: bool = False):
    """softmax(q k^T / sqrt(D)) v computed by plain PyTorch in the inputs' own dtype, a few
    (batch, head) pairs at a time: the baseline of flash-attention's tolerance rule for o
    (compare.assert_close's `baseline`)."""
    t, heads, mask, flat = _same_precision(q, k, v, causal)
    out = t.empty_like(flat[0])
    for i in range(0, flat[0].shape[0], heads):
        out[i:i + heads] = _attention(t, *(x[i:i + heads] for x in flat), mask)
    return out.view(q.shape)


def softmax_reference(x):
    return _torch().softmax(x.double(), dim=-1)


# --------------------------------------------------------------------------- comparison


def assert_unchanged(after, before, what: str) -> None:
    """An input the student received must hold the same values after the call."""
    t = _torch()
    g = t.from_numpy(after.array).to(before.device)
    if not t.equal(g.to(before.dtype) if g.dtype != before.dtype else g, before):
        diff = (g.float() != before.float())
        idx = t.unravel_index(diff.flatten().int().argmax(), before.shape)
        raise CheckFailed(f"{what} was modified by the call: {int(diff.sum())} elements changed, "
                          f"first at {where(idx)}. Inputs must be left as they were.")


def row_softmax_cases(sub, rng, shapes, guard_of) -> list:
    """The gpu layer's cases of a row softmax (`softmax(x)` along the last dim): for each
    (dtype, shape, scale) of `shapes` (scale None: one drawn in [1, 6]; negative: -|randn| *
    |scale|, every value negative), a (label, run) pair for grader.judge.answers.cases.run_cases. Each
    run makes the call through the gate (a launch, no computing torch op, and no device kernel
    but the student's Triton kernels and copies, from any thread of the worker), compares every
    element with the float64 reference here and checks x was left as it was. `guard_of(cols)`:
    the guard band past each input (the exercise's block width)."""
    from grader.judge.answers.compare import assert_close

    def run(dtype, shape, scale):
        (marker,), (x,) = seeded_inputs(rng, shape, dtype, count=1, scale=scale,
                                        guard=guard_of(shape[1]), absolute=scale < 0)
        r = sub.call("softmax", marker, opts={"poison_empty": True, "sync": True, "return_args": True})
        case = (f"{dtype} {shape}, randn * {scale:.1f}" if scale > 0 else
                f"{dtype} {shape}, -|randn| * {-scale:.1f} (every value negative)")
        assert_close(r.value, softmax_reference(x), what="softmax(x)", dtype=dtype,
                     case=case, seed=rng.seed)
        assert_unchanged(r.extras["args_after"][0], x, f"x ({case})")

    cases = []
    for dtype, shape, scale in shapes:
        scale = scale or float(rng.uniform(1, 6))
        label = f"randn * {scale:.1f}" if scale > 0 else f"-|randn| * {-scale:.1f}"
        cases.append((f"{dtype} {shape}, {label} [seed {rng.seed}]",
                      lambda dtype=dtype, shape=shape, scale=scale: run(dtype, shape, scale)))
    return cases
