"""Checks for exercises/flash_backward.py (extension track; lesson: "FlashAttention's forward
pass" (L = m + log(l), kept for the backward), the backward pass (recompute P = exp(S - L); the
D = rowsum(dO * O) trick) and FlashAttention-2's causal block skipping).

interp and adversarial only here: flash_fwd, flash_bwd and the autograd wrapper run under the
interpreter on small shapes (B, H <= 2, N from 17 to 100, D = 16 or 32). Every input is rounded
here to the dtype the kernel sees, so the float64 references (computed here) see exactly the
same numbers. flash_bwd is graded on the o and L computed here (o rounded to the dtype), so a
forward mistake costs the forward checks, and a backward mistake the backward ones.

The autograd wrapper runs flash_attention(q, k, v, causal).backward(g) in the worker
(grader.worker.probes.run's `backward` option) and gets o and q.grad, k.grad, v.grad back; the
kernel-use gate traces the forward and the backward alike.

Gradient tolerance, flash-attention's rule: the error against float64 may be at most twice that
of a same-precision PyTorch implementation (computed here, in this check, on the same inputs),
plus a floor.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader import errors
from grader.judge import reference
from grader.judge.compare import CheckFailed, assert_close, assert_shape, values
from grader.judge.inputs import randn, round_to, tensor
from grader.judge.kernel_use import KERNELS as GATED
from grader.judge.kernel_use import assert_in_bounds, assert_kernel_computed, assert_kernel_wrote
from grader.sandbox import sanitize

# flash_fwd and flash_bwd go through the kernel-use gate (grader.fixtures.Gated): a Triton
# launch, and no computing torch op around it.
FWD_GATE = GATED["flash_backward"]["flash_fwd"]
BWD_GATE = GATED["flash_backward"]["flash_bwd"]
# floor of the gradient tolerance, times max(1, max |reference|)
FLOOR = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-5}
LSE_TOL = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-5}   # atol = rtol on L (float32)


# ------------------------------------------------------------------------------ references


# float64 (o, L, m) and analytic (dq, dk, dv), shared with attention_backward's checks
forward_reference = reference.attention_lse
backward_reference = reference.attention_grads


def torch_same_precision(q, k, v, do, dtype, causal=False):
    """(o, dq, dk, dv) of plain PyTorch attention in `dtype` (N x N intermediates), as float64
    arrays: the baseline of flash-attention's tolerance rule."""
    import torch

    dt = getattr(torch, dtype)
    leaves = [torch.from_numpy(np.asarray(t, np.float64)).to(dt).requires_grad_() for t in (q, k, v)]
    qq, kk, vv = leaves
    s = (qq @ kk.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    if causal:
        N = q.shape[-2]
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    o = torch.softmax(s, dim=-1) @ vv
    o.backward(torch.from_numpy(np.asarray(do, np.float64)).to(dt))
    return [t.detach().double().numpy() for t in (o, *(x.grad for x in leaves))]


# ------------------------------------------------------------------------------ calls


def _qkv(rng, shape, dtype="float16", scale=1.0):
    return tuple(randn(rng, shape, dtype, scale) for _ in range(3))


def _describe(shape, dtype, causal, blocks, case=""):
    B, H, N, D = shape
    b = ", ".join(f"{k}={v}" for k, v in blocks.items())
    return ", ".join(x for x in (f"B={B}, H={H}, N={N}, D={D}", b, dtype,
                                 "causal" if causal else "", case) if x)


def _guard(shape, blocks):
    return max(blocks.get("BLOCK_M", 64), blocks.get("BLOCK_N", 64), 64) * shape[-1]


def call_fwd(sub, q, k, v, dtype, causal, blocks, opts=None):
    args = [tensor(t, dtype, guard=_guard(q.shape, blocks)) for t in (q, k, v)]
    return sub.call("flash_fwd", *args, causal=causal, **blocks,
                    opts={"poison_empty": True, **(opts or {})})


def call_bwd(sub, q, k, v, o, lse, do, dtype, causal, blocks, opts=None):
    g = _guard(q.shape, blocks)
    args = [*(tensor(t, dtype, guard=g) for t in (q, k, v, o)),
            tensor(lse, "float32", guard=g), tensor(do, dtype, guard=g)]
    return sub.call("flash_bwd", *args, causal=causal, **blocks,
                    opts={"poison_empty": True, **(opts or {})})


def _pair(got, what):
    """The (o, lse) or (dq, dk, dv) a call returned, as a tuple of the expected length."""
    n = 2 if what.startswith("flash_fwd") else 3
    if not isinstance(got, (tuple, list)) or len(got) != n:
        raise CheckFailed(f"{what}: expected a tuple of {n} tensors, got {type(got).__name__}"
                          + (f" of length {len(got)}" if isinstance(got, (tuple, list)) else ""))
    return got


LSE_NO_M_HINT = ("Your L equals log(l) without the max: L = m + log(l). l is a sum of exp(s - m), "
                 "so log(l) alone is the logsumexp shifted by -m.")
LSE_LOG2_HINT = ("Your L equals the logsumexp in log base 2 (L * log2(e)): if you compute with "
                 "exp2 and m in log2 units, convert back: L = (m2 + log2(l)) * ln(2).")
STRICT_HINT = ("Your output equals attention with key j visible only for j < i: the diagonal is "
               "visible too. The causal mask is j <= i (cols <= rows).")


DIAGONAL_HINT = ("Right with BLOCK_M = BLOCK_N = {equal} on the same inputs, wrong with BLOCK_M={bm}, "
                 "BLOCK_N={bn}: with BLOCK_M != BLOCK_N a key block can cross the diagonal without "
                 "starting on it. Mask every key block that reaches past the query block's first "
                 "row (start + BLOCK_N > pid_m * BLOCK_M), on cols <= rows, and stop the loop at "
                 "min((pid_m + 1) * BLOCK_M, N).")


def check_forward(sub, q, k, v, dtype, causal, blocks, seed, case="", opts=None):
    """flash_fwd's o and L against float64 in full, with the hint its evidence supports; the
    call's extras (what the probes recorded) are returned."""
    try:
        return _check_forward(sub, q, k, v, dtype, causal, blocks, seed, case, opts)
    except CheckFailed as e:
        bm, bn = blocks.get("BLOCK_M", 64), blocks.get("BLOCK_N", 64)
        if e.hint or not causal or bm == bn:
            raise
        # the evidence: the same inputs with equal blocks (a control call, in this check)
        equal = dict(BLOCK_M=min(bm, bn), BLOCK_N=min(bm, bn))
        try:
            _check_forward(sub, q, k, v, dtype, causal, equal, seed, case)
        except (CheckFailed, errors.StudentRaised, errors.BadReturn):
            raise e from None
        raise CheckFailed(str(e), hint=DIAGONAL_HINT.format(equal=min(bm, bn), bm=bm, bn=bn)) from None


def _check_forward(sub, q, k, v, dtype, causal, blocks, seed, case="", opts=None):
    context = _describe(q.shape, dtype, causal, blocks, case)
    what = f"flash_fwd(q, k, v, causal={causal})"
    r = call_fwd(sub, q, k, v, dtype, causal, blocks, opts)
    o, lse = _pair(r.value, what)
    ref_o, ref_L, m = forward_reference(q, k, v, causal)
    try:
        assert_close(lse, ref_L, what=f"the lse of {what}", dtype="float32", case=context,
                     seed=seed, atol=LSE_TOL[dtype] * max(1.0, float(np.abs(m).max())),
                     rtol=LSE_TOL[dtype])
    except CheckFailed as e:
        got = np.asarray(values(lse), dtype=np.float64)
        hint = ""
        if got.shape == ref_L.shape:
            if np.allclose(got, ref_L - m, rtol=1e-2, atol=1e-2):
                hint = LSE_NO_M_HINT
            elif np.allclose(got, ref_L / np.log(2), rtol=1e-2, atol=1e-2):
                hint = LSE_LOG2_HINT
            elif causal:
                _, strict_L, _ = forward_reference(q, k, v, causal, strict=True)
                if np.allclose(got[..., 1:], strict_L[..., 1:], rtol=1e-2, atol=1e-2):
                    hint = STRICT_HINT
        raise CheckFailed(str(e), hint=hint) from None
    try:
        assert_close(o, ref_o, what=f"the o of {what}", dtype=dtype, case=context, seed=seed)
    except CheckFailed as e:
        got = np.asarray(values(o), dtype=np.float64)
        hint = ""
        if causal and got.shape == ref_o.shape:
            strict_o, _, _ = forward_reference(q, k, v, causal, strict=True)
            if np.allclose(got[..., 1:, :], strict_o[..., 1:, :], rtol=1e-2, atol=1e-2):
                hint = STRICT_HINT
        raise CheckFailed(str(e), hint=hint) from None
    return r.extras


RECOMPUTE_HINT = ("dV = P^T dO is wrong, and dV needs nothing but P: recompute instead of "
                  "remember, P = exp(S - L) with S = scale * Q K^T and the L the forward saved (the "
                  "one passed in), masked like the forward; not exp(S - a running max).")
DELTA_HINT = ("Your dK and dQ equal the gradients with dS = P * dP: the D term is missing. The D "
              "trick: D = rowsum(dO * O), one number per query row, and dS = P * (dP - D).")
SCALE_HINT = ("Your {name} equals the right one times sqrt(D): S = scale * Q K^T, so the scale "
              "1/sqrt(D) multiplies {name} too ({name} = scale * {formula}).")


def _grad_hint(got, ref, twin_nod, D):
    """The hint the evidence supports: which gradient is off and like which known mistake."""
    g = [np.asarray(values(t), dtype=np.float64) for t in got]
    if any(a.shape != b.shape for a, b in zip(g, ref)):
        return ""

    def near(a, b):
        return np.allclose(a, b, rtol=2e-2, atol=2e-2 * max(1.0, float(np.abs(b).max())))

    if not near(g[2], ref[2]):
        return RECOMPUTE_HINT
    if not near(g[0], ref[0]) and not near(g[1], ref[1]) and near(g[0], twin_nod[0]) \
            and near(g[1], twin_nod[1]):
        return DELTA_HINT
    for i, name, formula in ((1, "dK", "dS^T Q"), (0, "dQ", "dS K")):
        if not near(g[i], ref[i]) and near(g[i], ref[i] * np.sqrt(D)):
            return SCALE_HINT.format(name=name, formula=formula)
    return ""


def torch_float32_rounded(q, k, v, do, dtype, causal=False):
    """(dq, dk, dv) of plain PyTorch attention computed in float32 on the same inputs, each
    rounded to `dtype`: the baseline where PyTorch in `dtype` itself overflows."""
    return [round_to(g, dtype).astype(np.float64)
            for g in torch_same_precision(q, k, v, do, "float32", causal)[1:]]


DQ_ONLY_HINT = ("Only dQ is wrong; dK and dV are right, on sizes where many programs run at "
                "once (the interpreter runs them one at a time, so a race cannot show there): if "
                "several programs add into the same rows of dQ, a tl.load + tl.store of each "
                "share races and loses updates. Add the shares with tl.atomic_add into a "
                "zero-initialised float32 dQ (cast at the end), or give each query block its own "
                "program that loops over the key blocks (one writer per row, no atomics).")


def gradient_hint(ok: dict) -> str:
    """For the gpu layer's full-size comparison: the hint its evidence supports, from which of
    dq, dk, dv matched ({"dq": bool, "dk": bool, "dv": bool}). Only dQ wrong on the GPU, where
    the interp checks saw it right, points at a race between programs summing dQ."""
    if not ok.get("dq", True) and ok.get("dk", False) and ok.get("dv", False):
        return DQ_ONLY_HINT
    return ""


def assert_grads(got, q, k, v, do, dtype, causal, what, context, seed):
    """dq, dk, dv against float64, each within 2 x PyTorch's same-precision error + a floor.

    Where PyTorch in `dtype` is not finite (float16 with a large dO: its float16 dP = dO V^T
    passes 65504, and inf - inf gives NaN), its error would allow anything, NaN included. The
    baseline is then PyTorch in float32 on the same inputs, rounded to `dtype`: the error a
    kernel that keeps dP and dS in float32, as tl.dot gives them, cannot avoid."""
    ref = backward_reference(q, k, v, do, causal)
    base = torch_same_precision(q, k, v, do, dtype, causal)[1:]
    upcast = None
    for i, (name, g, r) in enumerate(zip(("dq", "dk", "dv"), got, ref)):
        source, b = f"PyTorch's {dtype} error", base[i]
        if not np.isfinite(b).all():
            upcast = upcast or torch_float32_rounded(q, k, v, do, dtype, causal)
            b = upcast[i]
            source = (f"the error of PyTorch in float32 rounded to {dtype} (PyTorch's {dtype} "
                      f"{name} is not finite here)")
        baseline = float(np.abs(b - r).max())
        floor = FLOOR[dtype] * max(1.0, float(np.abs(r).max()))
        try:
            assert_close(g, r, what=f"the {name} of {what}", dtype=dtype, case=context, seed=seed,
                         atol=2 * baseline + floor, rtol=0.0)
        except CheckFailed as e:
            hint = _grad_hint(got, ref, backward_reference(q, k, v, do, causal, False), q.shape[-1])
            raise CheckFailed(f"{e} (allowed: 2 x {source} {baseline:.2g} + floor "
                              f"{floor:.2g})", hint=hint) from None


def check_backward(sub, q, k, v, do, dtype, causal, blocks, seed, case="", opts=None):
    """flash_bwd on the o and L computed here, its gradients checked in full; returns the
    call's extras and the o it was given."""
    context = _describe(q.shape, dtype, causal, blocks, case)
    what = f"flash_bwd(q, k, v, o, lse, do, causal={causal})"
    o, L, _ = forward_reference(q, k, v, causal)
    o, L = round_to(o, dtype), round_to(L, "float32")
    r = call_bwd(sub, q, k, v, o, L, do, dtype, causal, blocks, opts)
    assert_grads(_pair(r.value, what), q, k, v, do, dtype, causal, what, context, seed)
    return r.extras, o, L


# ------------------------------------------------------------------------------ forward


@pytest.mark.check("flash_backward.forward_matches_float64")
def test_forward_matches_float64(student, rng):
    sub = student()
    for shape, dtype, blocks in (((2, 2, 45, 32), "float16", dict(BLOCK_M=32, BLOCK_N=16)),
                                 ((1, 2, 70, 16), "float32", dict(BLOCK_M=16, BLOCK_N=32))):
        q, k, v = _qkv(rng, shape, dtype)
        check_forward(sub, q, k, v, dtype, False, blocks, rng.seed)


@pytest.mark.check("flash_backward.lse_includes_m")
def test_lse_includes_m(student, rng):
    sub = student()
    # q, k ~ 6 * randn, D = 16: scores ~ 36 * randn, row maxima ~ 100, far from log(l) <= log(N)
    shape, blocks = (1, 2, 40, 16), dict(BLOCK_M=16, BLOCK_N=16)
    q, k, v = _qkv(rng, shape, "float16", scale=6.0)
    check_forward(sub, q, k, v, "float16", False, blocks, rng.seed, case="q, k scaled: large scores")


@pytest.mark.check("flash_backward.causal_mask")
def test_causal_mask(student, rng):
    sub = student()
    # BLOCK_M != BLOCK_N both ways, and N ragged: the diagonal crosses blocks at every offset
    for shape, blocks in (((1, 2, 45, 16), dict(BLOCK_M=32, BLOCK_N=16)),
                          ((2, 1, 37, 16), dict(BLOCK_M=16, BLOCK_N=32))):
        q, k, v = _qkv(rng, shape)
        check_forward(sub, q, k, v, "float16", True, blocks, rng.seed)


# ------------------------------------------------------------------------------ backward


@pytest.mark.check("flash_backward.backward_matches_float64")
def test_backward_matches_float64(student, rng):
    sub = student()
    for shape, dtype, blocks in (((2, 2, 45, 32), "float16", dict(BLOCK_M=32, BLOCK_N=16)),
                                 ((1, 2, 33, 16), "float32", dict(BLOCK_M=16, BLOCK_N=32))):
        q, k, v = _qkv(rng, shape, dtype)
        do = randn(rng, shape, dtype)
        check_backward(sub, q, k, v, do, dtype, False, blocks, rng.seed)


@pytest.mark.check("flash_backward.backward_causal")
def test_backward_causal(student, rng):
    sub = student()
    for shape, blocks in (((1, 2, 45, 16), dict(BLOCK_M=16, BLOCK_N=32)),
                          ((2, 1, 40, 32), dict(BLOCK_M=32, BLOCK_N=16))):
        q, k, v = _qkv(rng, shape)
        do = randn(rng, shape, "float16")
        check_backward(sub, q, k, v, do, "float16", True, blocks, rng.seed)


@pytest.mark.check("flash_backward.autograd_wrapper")
def test_autograd_wrapper(student, rng):
    sub = student()
    # flash_attention(q, k, v, causal).backward(g) in the worker (grader.worker.probes.run,
    # `backward`): o and the gradients q.grad, k.grad, v.grad come back, checked in full
    shape = (1, 2, 33, 16)
    for causal in (False, True):
        q, k, v = _qkv(rng, shape)
        g = randn(rng, shape, "float16")
        what = f"flash_attention(q, k, v, causal={causal}).backward(g)"
        context = _describe(shape, "float16", causal, {})
        r = sub.call("flash_attention", *(tensor(t, "float16") for t in (q, k, v, g)),
                     causal=causal, opts={"backward": {"grad_arg": 3}, "poison_empty": True})
        if not isinstance(r.value, tuple) or len(r.value) != 2:
            raise CheckFailed(f"{what}: the call returned no output and gradients")
        out, grads = r.value
        assert_close(out, forward_reference(q, k, v, causal)[0], what=f"the output of {what}",
                     dtype="float16", case=context, seed=rng.seed)
        missing = [n for n, t in zip(("q", "k", "v"), grads) if t is None]
        if missing:
            raise CheckFailed(f"{what}: no gradient reached {', '.join(missing)}: FlashAttention."
                              f"backward must return (dq, dk, dv, None), one per input of forward",
                              hint="The autograd.Function saves q, k, v, o and L in forward "
                                   "(ctx.save_for_backward) and returns flash_bwd's (dq, dk, dv) "
                                   "from backward, plus None for causal.")
        assert_grads(grads, q, k, v, g, "float16", causal, what, context, rng.seed)


DS_PRECISION_HINT = (
    "Right with dO and V at ordinary scale (the control call: the same q, k, dO / 1000, V / 10), "
    "wrong here, where |dP| = |dO V^T| reaches {dp:.3g}, past float16's 65504, while dS = P * "
    "(dP - D) stays under {ds:.2g}: keep dP, dP - D and dS in float32 (tl.dot accumulates in "
    "float32) and cast only dS, the operand of tl.dot, to float16. Casting dP or dP - D to "
    "float16 first turns them into inf here.")


@pytest.mark.check("flash_backward.ds_precision")
def test_ds_precision(student, rng):
    sub = student()
    # dO x 1000 and V x 10 with D = 32: |dP| = |dO V^T| ~ 6e4 typical (a quarter of it past
    # float16's 65504), while q, k x 0.5 spread the attention (P ~ 1/N), so dS = P * (dP - D)
    # stays ~1e3 and every gradient is in range. float16 PyTorch overflows here: assert_grads
    # takes its baseline from float32 then.
    shape, dtype, blocks = (1, 2, 45, 32), "float16", dict(BLOCK_M=32, BLOCK_N=16)
    q, k = (randn(rng, shape, dtype, 0.5) for _ in range(2))
    v, do = randn(rng, shape, dtype, 10.0), randn(rng, shape, dtype, 1000.0)
    dp = do.astype(np.float64) @ np.swapaxes(v, -1, -2).astype(np.float64)
    case = f"dO x 1000, V x 10: |dP| up to {np.abs(dp).max():.3g}, past float16's 65504"
    try:
        check_backward(sub, q, k, v, do, dtype, False, blocks, rng.seed, case=case)
    except CheckFailed as e:
        if e.hint:
            raise
        # the evidence: the same q, k with dO and V at ordinary scale (a control call)
        try:
            check_backward(sub, q, k, round_to(v / 10, dtype), round_to(do / 1000, dtype), dtype,
                           False, blocks, rng.seed, case="control: dO / 1000, V / 10")
        except (CheckFailed, errors.StudentRaised, errors.BadReturn):
            raise e from None
        o, L, _ = forward_reference(q, k, v)
        p = np.exp(reference.causal_scores(q, k) - L[..., None])
        ds = p * (dp - (do * o).sum(-1, keepdims=True))          # dS = P * (dP - D), float64
        raise CheckFailed(str(e), hint=DS_PRECISION_HINT.format(
            dp=float(np.abs(dp).max()), ds=float(np.abs(ds).max()))) from None


# ------------------------------------------------------------------------------ masks, kernels


VALUE_CHECKS = ("flash_backward.forward_matches_float64", "flash_backward.lse_includes_m",
                "flash_backward.causal_mask", "flash_backward.backward_matches_float64",
                "flash_backward.backward_causal")
MASK_HINTS = {
    "tl.load": "Mask every load on the rows and keys that exist (rows < N, cols < N): a load "
               "without mask= reads past the end of q, k, v (or dO, L, D) in the last block, "
               "even when tl.where sets those scores to -inf afterwards.",
    "tl.store": "Mask every store on the rows that exist (rows < N; cols < N for dK and dV).",
}


@pytest.mark.check("flash_backward.masked_accesses")
def test_masked_accesses(student, rng):
    sub = student()
    # N ragged for every block size: the last (batch, head) of each tensor ends where its
    # memory ends; the bounds hooks record every lane past it (grader/worker/bounds.py)
    shape, blocks = (1, 1, 50, 16), dict(BLOCK_M=32, BLOCK_N=16)
    for causal in (False, True):
        q, k, v = _qkv(rng, shape)
        r = call_fwd(sub, q, k, v, "float16", causal, blocks)
        what = f"flash_fwd(q, k, v, causal={causal}) ({_describe(shape, 'float16', causal, blocks)})"
        assert_in_bounds(r.extras, ["q", "k", "v"], what, MASK_HINTS)
        wrote(r, what, "_flash_fwd", 2)
        o, L, _ = forward_reference(q, k, v, causal)
        do = randn(rng, shape, "float16")
        r = call_bwd(sub, q, k, v, o, L, do, "float16", causal, blocks)
        what = (f"flash_bwd(q, k, v, o, lse, do, causal={causal}) "
                f"({_describe(shape, 'float16', causal, blocks)})")
        assert_in_bounds(r.extras, ["q", "k", "v", "o", "lse", "do"], what, MASK_HINTS)
        wrote(r, what, "_bwd_dkdv and _bwd_dq", 3)


def wrote(r, what: str, launch: str, n: int) -> None:
    """Staying in bounds, or launching, by computing nothing earns nothing: every output of the
    call (o and lse, or dq, dk and dv) was stored in full by a kernel, all finite."""
    for name, t in zip(("o", "lse") if n == 2 else ("dq", "dk", "dv"), _pair(r.value, what)):
        size = int(np.asarray(values(t)).size)
        assert_kernel_wrote(r.extras, t, size, f"the {name} of {what}", launch)


@pytest.mark.check("flash_backward.uses_kernel")
def test_uses_kernel(student, rng):
    sub = student()
    shape = (1, 2, 40, 16)
    q, k, v = _qkv(rng, shape)
    opts = {"trace": True, "poison_empty": True}
    r = sub.call("flash_fwd", *(tensor(t, "float16") for t in (q, k, v)), opts=opts)
    assert_kernel_computed(r.extras, *FWD_GATE)
    o, L, _ = forward_reference(q, k, v)
    do = randn(rng, shape, "float16")
    r2 = sub.call("flash_bwd", *(tensor(t, "float16") for t in (q, k, v, o)), tensor(L, "float32"),
                  tensor(do, "float16"), opts=opts)
    assert_kernel_computed(r2.extras, *BWD_GATE)
    try:
        wrote(r, FWD_GATE[0], "_flash_fwd", 2)
        wrote(r2, BWD_GATE[0], "_bwd_dkdv and _bwd_dq", 3)
    except CheckFailed as e:
        # kernels that ran but left NaN or unstored elements: a wrong value, the value checks'
        # business when they fail too
        e.follows = VALUE_CHECKS
        raise
    r = r2
    # the values are the other checks' business; here only the dtype the wrapper allocates
    assert_shape(_pair(r.value, BWD_GATE[0])[2], shape, what=BWD_GATE[0], dtype="float16")


# ------------------------------------------------------------------------------- gpu, perf
# Real sizes on CUDA (mode "cuda"). q, k, v and dO are drawn by torch's generator in the worker
# and again here (grader.judge.gpu.seeded_inputs), so they need no transfer; the o and L that
# flash_bwd is given are computed here (float32, o rounded to the dtype) and sent. The references
# run here on the GPU: float32 for o and L, float64 for the gradients, and PyTorch's own backward
# in the inputs' dtype for the tolerance rule.

# (B, H, N, D, dtype, causal): N >= 4K causal, D 64 and 128, fp16 and bf16, B and H > 1, ragged N
GPU_CASES = ((1, 16, 4096, 128, "float16", True), (1, 8, 2048, 128, "bfloat16", False),
             (2, 4, 1000, 64, "float16", False), (2, 3, 777, 64, "bfloat16", True),
             (1, 2, 33, 128, "float16", True))
AUTOGRAD_CASE = (2, 4, 1000, 64, "float16", True)
GUARD_ROWS = 256   # poison behind each input: more than any tile an unmasked load can reach


def _gpu_case(B, H, N, D, dtype, causal):
    return f"{dtype} (B, H, N, D) = ({B}, {H}, {N}, {D}){', causal' if causal else ''}"


def assert_grads_gpu(got, q, k, v, do, dtype, causal, what, case, seed):
    """dq, dk, dv (TensorValues) against float64 on the GPU, each within 2 x the error of
    PyTorch's own backward in `dtype` on the same inputs, plus a floor."""
    import math

    import torch

    from grader.judge import gpu as g

    got = _pair(got, what)
    ref = g.attention_grads_reference(q, k, v, do, causal)
    base = g.same_precision_grads(q, k, v, do, causal)
    failures = {}   # name -> (CheckFailed, hint): all three are compared, for the hint
    for name, x, r, b in zip(("dq", "dk", "dv"), got, ref, base):
        baseline = float((b.double() - r).abs().max())
        if not math.isfinite(baseline):   # PyTorch overflowed here: the floor alone
            baseline = 0.0
        floor = FLOOR[dtype] * max(1.0, float(r.abs().max()))
        try:
            g.assert_close_gpu(x, r, what=f"the {name} of {what}", dtype=dtype, case=case,
                               seed=seed, atol=2 * baseline + floor, rtol=0.0)
        except CheckFailed as e:
            hint = ""
            if hasattr(x, "array") and tuple(x.shape) == tuple(r.shape):
                mine = torch.from_numpy(x.array).to(r.device, torch.float64)
                near = torch.allclose(mine, r * math.sqrt(q.shape[-1]), rtol=2e-2,
                                      atol=2e-2 * max(1.0, float(r.abs().max())))
                if name == "dv":
                    hint = RECOMPUTE_HINT
                elif near:
                    hint = SCALE_HINT.format(name={"dq": "dQ", "dk": "dK"}[name],
                                             formula="dS K" if name == "dq" else "dS^T Q")
            failures[name] = (CheckFailed(f"{e} (allowed: 2 x PyTorch's {dtype} error "
                                          f"{baseline:.2g} + floor {floor:.2g})"), hint)
        del r, b
    if failures:
        name = next(iter(failures))
        e, hint = failures[name]
        raise CheckFailed(str(e), hint=hint or gradient_hint(
            {n: n not in failures for n in ("dq", "dk", "dv")})) from None


def assert_forward_gpu(value, q, k, v, dtype, causal, what, case, seed):
    """flash_fwd's (o, lse) against the float32 reference on the GPU, in full."""
    from grader.judge import gpu as g

    o, lse = _pair(value, what)
    ref_o, ref_lse = g.attention_lse_reference(q, k, v, causal)
    g.assert_close_gpu(o, ref_o, what=f"the o of {what}", dtype=dtype, case=case, seed=seed)
    big = max(1.0, float(ref_lse.abs().max()))
    g.assert_close_gpu(lse, ref_lse, what=f"the lse of {what}", dtype="float32", case=case,
                       seed=seed, atol=LSE_TOL[dtype] * big, rtol=LSE_TOL[dtype])
    return ref_o, ref_lse


def given_o_lse(ref_o, ref_lse, dtype, guard):
    """o (rounded to `dtype`) and lse as arguments for flash_bwd, poisoned behind."""
    import torch

    o = ref_o.to(getattr(torch, dtype))
    o_arr = o.cpu().numpy() if dtype == "float16" else o.float().cpu().numpy()
    return (tensor(o_arr, dtype, device="cuda", guard=guard),
            tensor(ref_lse.cpu().numpy(), "float32", device="cuda", guard=guard)), o


@pytest.mark.check("flash_backward.gpu_real_sizes")
def test_gpu_real_sizes(student, rng, gpu, credit):
    from grader.judge import gpu as g
    from grader.judge.cases import run_cases

    sub = student()

    def run(B, H, N, D, dtype, causal):
        case = _gpu_case(B, H, N, D, dtype, causal)
        guard = GUARD_ROWS * D
        markers, (q, k, v, do) = g.seeded_inputs(rng, (B, H, N, D), dtype, count=4, guard=guard)
        fwd = f"flash_fwd(q, k, v, causal={causal})"
        r = sub.call("flash_fwd", *markers[:3], causal=causal, opts={"poison_empty": True, "sync": True})
        ref_o, ref_lse = assert_forward_gpu(r.value, q, k, v, dtype, causal, fwd, case, rng.seed)
        del r
        (mo, ml), o = given_o_lse(ref_o, ref_lse, dtype, guard)
        small = N <= 1000   # send the inputs back to check them only where that is cheap
        bwd = f"flash_bwd(q, k, v, o, lse, do, causal={causal})"
        r = sub.call("flash_bwd", *markers[:3], mo, ml, markers[3], causal=causal,
                     opts={"poison_empty": True, "sync": True, "return_args": small})
        assert_grads_gpu(r.value, q, k, v, do, dtype, causal, bwd, case, rng.seed)
        if small:
            for name, after, before in zip(("q", "k", "v", "o", "lse", "do"), r.extras["args_after"],
                                           (q, k, v, o, ref_lse, do)):
                g.assert_unchanged(after, before, f"{name} ({case})")

    def autograd(B, H, N, D, dtype, causal):
        # the wrapper at a real size: its backward runs on autograd's device thread, which the
        # profiler of the gate sees too
        case = _gpu_case(B, H, N, D, dtype, causal)
        markers, (q, k, v, do) = g.seeded_inputs(rng, (B, H, N, D), dtype, count=4, guard=GUARD_ROWS * D)
        what = f"flash_attention(q, k, v, causal={causal}).backward(g)"
        r = sub.call("flash_attention", *markers, causal=causal,
                     opts={"backward": {"grad_arg": 3}, "poison_empty": True, "sync": True})
        if not isinstance(r.value, tuple) or len(r.value) != 2:
            raise CheckFailed(f"{what}: the call returned no output and gradients")
        out, grads = r.value
        g.assert_close_gpu(out, g.attention_reference(q, k, v, causal=causal),
                           what=f"the output of {what}", dtype=dtype, case=case, seed=rng.seed)
        if any(t is None for t in grads):
            raise CheckFailed(f"{what}: no gradient reached q, k or v: FlashAttention.backward "
                              f"must return (dq, dk, dv, None)")
        assert_grads_gpu(grads, q, k, v, do, dtype, causal, what, case, rng.seed)

    cases = [(f"{_gpu_case(*c)} [seed {rng.seed}]", lambda c=c: run(*c)) for c in GPU_CASES]
    cases.append((f"{_gpu_case(*AUTOGRAD_CASE)}, through flash_attention(...).backward(g) "
                  f"[seed {rng.seed}]", lambda: autograd(*AUTOGRAD_CASE)))
    run_cases(credit, cases)


def _sanitizer_call(sub, device: str) -> None:
    """Causal flash_fwd and flash_bwd at N = 1000 (no block size divides it), seeded inputs the
    worker draws itself, the answers checked here (loosely: the values are other checks' job)."""
    from grader.judge import gpu as g
    from grader.judge.inputs import seeded, torch_randn

    shape = (1, 2, 1000, 64)
    seeds = [int(x) for x in np.random.default_rng().integers(0, 2**31 - 1, size=4)]
    markers = [seeded(shape, "float16", device, s) for s in seeds]
    q, k, v, do = (torch_randn(shape, "float16", device, s) for s in seeds)
    got = sanitize.gated_call(sub, "flash_backward", "flash_fwd", *markers[:3], causal=True)
    ref_o, ref_lse = g.attention_lse_reference(q, k, v, causal=True)
    if not (isinstance(got, (tuple, list)) and len(got) == 2 and sanitize.close_enough(got[0], ref_o)
            and sanitize.close_enough(got[1], ref_lse)):
        raise sanitize.wrong_answer("flash_backward", "flash_fwd", SANITIZER_TARGET)
    o = ref_o.half()
    got = sanitize.gated_call(sub, "flash_backward", "flash_bwd", *markers[:3],
                              tensor(o.cpu().numpy(), "float16", device=device),
                              tensor(ref_lse.cpu().numpy(), "float32", device=device), markers[3],
                              causal=True)
    ref = g.attention_grads_reference(q, k, v, do, True, dtype="float32")
    if not (isinstance(got, (tuple, list)) and len(got) == 3 and all(
            sanitize.close_enough(x, r, tol=5e-2) for x, r in zip(got, ref))):
        raise sanitize.wrong_answer("flash_backward", "flash_bwd", SANITIZER_TARGET)


SANITIZER_TARGET = sanitize.Target("causal, q, k, v, do of shape (1, 2, 1000, 64) float16",
                                   _sanitizer_call)


@pytest.mark.check("flash_backward.sanitizer")
def test_sanitizer(student, gpu):
    if sanitize.sanitizer_path() is None:
        pytest.skip("compute-sanitizer is not installed on this machine (it comes with the CUDA toolkit)")
    sanitize.memcheck(student().directory, "flash_backward")


# The perf layer: B = 1, H = 32, D = 128, float16, N = 4K and 8K, causal and not. The four
# perf checks share one measurement (made by whichever of them runs first in this grading run):
#   1. for every (N, causal), one gated call of flash_fwd and of flash_bwd (traced and profiled:
#      only the student's Triton kernels ran), each output checked in full;
#   2. the fastest SDPA backend's forward and backward (torch.autograd.grad on its graph), timed
#      here with nothing of the student's alive;
#   3. flash_fwd (q refilled before every call) and flash_bwd (dO refilled) as timed requests in
#      a fresh worker (the gate's profiler slows the process it ran in), every request's outputs
#      verified by checksums and at random in full, with the peak CUDA memory of each request.
PERF_N = (4096, 8192)
B_PERF, H_PERF, D_PERF = 1, 32, 128
CAUSAL_FULL, CAUSAL_ZERO = 0.6, 0.9    # causal time / non-causal time: full and zero credit
EXTRA_COPIES = 6                       # memory beyond the outputs: up to 6 tensors the size of q,
EXTRA_MIB = 64                         # plus 64 MiB (allocator rounding, a few numbers per row)
GRAD_SLACK = 8.0                       # checksum tolerance of the gradients (timing.Requests)


def _flops(N: int, causal: bool, backward: bool) -> float:
    """4*B*H*N^2*D for the forward (half of it causal); the backward 2.5x its forward."""
    f = 4 * B_PERF * H_PERF * N * N * D_PERF * (0.5 if causal else 1.0)
    return 2.5 * f if backward else f


def _sdpa_ms(q, k, v, do, causal: bool) -> dict:
    """{"fwd": (ms, backend), "bwd": (ms, backend)}: the fastest SDPA backend that runs here for
    each pass, timed in this process in the same harness as the student's calls (an input
    refilled before each call, a checksum of the outputs after)."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from grader.judge import timing

    best = {"fwd": (float("inf"), "none"), "bwd": (float("inf"), "none")}
    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
                    SDPBackend.EFFICIENT_ATTENTION):
        try:
            with sdpa_kernel(backend):
                fwd = timing.per_call_ms(timing.local_request(
                    lambda x: F.scaled_dot_product_attention(x, k, v, is_causal=causal), [q.clone()]))
                leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
                out = F.scaled_dot_product_attention(*leaves, is_causal=causal)
                bwd = timing.per_call_ms(timing.local_request(
                    lambda g: torch.autograd.grad(out, leaves, g, retain_graph=True), [do.clone()]))
                del out, leaves
        except RuntimeError:
            continue
        best["fwd"] = min(best["fwd"], (fwd, backend.name))
        best["bwd"] = min(best["bwd"], (bwd, backend.name))
    torch.cuda.empty_cache()
    return best


class _Perf:
    """What the perf checks of one grading run measured: times, baselines, peaks, and the
    failure of each pass (a CheckFailed that every check of that pass re-raises)."""

    def __init__(self):
        self.ms, self.base, self.peak, self.failed = {}, {}, {}, {}
        self.note = ""

    def failure(self, passes) -> None:
        for p in passes:
            if p in self.failed:
                raise self.failed[p]


def _measure(student, rng, gpu, workers) -> _Perf:
    cache = gpu.__dict__.setdefault("flash_backward_perf", {})
    sub = student()
    key = str(sub.directory)
    if key not in cache:
        cache[key] = _measure_all(sub, rng, gpu, workers)
    return cache[key]


def _measure_all(sub, rng, gpu, workers) -> _Perf:
    import torch

    from grader import errors
    from grader.judge import gpu as g
    from grader.judge import timing

    perf = _Perf()
    shape = {N: (B_PERF, H_PERF, N, D_PERF) for N in PERF_N}
    inputs = {N: g.seeded_inputs(rng, shape[N], "float16", count=4) for N in PERF_N}
    configs = [(N, c) for N in PERF_N for c in (False, True)]
    given = {}   # (N, causal) -> the o and L flash_bwd gets: markers, and the same here
    for N, causal in configs:
        ref_o, ref_lse = g.attention_lse_reference(*inputs[N][1][:3], causal=causal)
        (mo, ml), o = given_o_lse(ref_o, ref_lse, "float16", 0)
        given[(N, causal)] = (mo, ml, o, ref_lse)
        del ref_o
    # 1. the gate at every size, outputs checked in full
    for N, causal in configs:
        markers, (q, k, v, do) = inputs[N]
        case = _gpu_case(*shape[N], "float16", causal)
        for name in ("fwd", "bwd"):
            if name in perf.failed:
                continue
            try:
                if name == "fwd":
                    what = f"flash_fwd(q, k, v, causal={causal})"
                    r = sub.call("flash_fwd", *markers[:3], causal=causal, opts={"sync": True})
                    assert_forward_gpu(r.value, q, k, v, "float16", causal, what, case, rng.seed)
                else:
                    what = f"flash_bwd(q, k, v, o, lse, do, causal={causal})"
                    mo, ml = given[(N, causal)][:2]
                    r = sub.call("flash_bwd", *markers[:3], mo, ml, markers[3], causal=causal,
                                 opts={"sync": True})
                    _compare_grads(r.value, g.attention_grads_reference(q, k, v, do, causal,
                                                                        dtype="float32"), case, what)
                del r
            except (CheckFailed, errors.StudentProblem) as e:
                perf.failed[name] = e
    # 2. the baselines, with nothing of the student's alive (timing.quiet_gpu)
    perf.note = timing.quiet_gpu(workers, "flash_backward perf")
    for N, causal in configs:
        perf.base[(N, causal)] = _sdpa_ms(*inputs[N][1], causal)
    # 3. the student's calls, timed in a fresh worker
    for N, causal in configs:
        markers, (q, k, v, do) = inputs[N]
        for name in ("fwd", "bwd"):
            if name in perf.failed:
                continue
            try:
                if name == "fwd":
                    reqs = timing.Requests(
                        sub, "flash_fwd", markers[:3], kwargs={"causal": causal}, rng=rng,
                        inputs=[q, k, v], dtype="float16", what=f"flash_fwd(q, k, v, causal={causal}) at N={N}",
                        reference=lambda i, c=causal: g.attention_lse_reference(*i, causal=c),
                        compare=lambda out, exp, case, c=causal, w=f"flash_fwd at N={N}":
                            _compare_fwd(out, exp, case, w))
                else:
                    mo, ml, o, lse = given[(N, causal)]
                    reqs = timing.Requests(
                        sub, "flash_bwd", [*markers[:3], mo, ml, markers[3]],
                        kwargs={"causal": causal}, rng=rng, arg=5, inputs=[q, k, v, o, lse, do],
                        dtype="float16", slack=GRAD_SLACK,
                        what=f"flash_bwd(q, k, v, o, lse, do, causal={causal}) at N={N}",
                        reference=lambda i, c=causal: g.attention_grads_reference(
                            i[0], i[1], i[2], i[5], c, dtype="float32"),
                        compare=lambda out, exp, case, w=f"flash_bwd at N={N}":
                            _compare_grads(out, exp, case, w))
                ms = timing.per_call_ms(reqs)
                reqs.verify()
                flops = _flops(N, causal, name == "bwd")
                impossible = timing.below_floor(ms, flops / gpu.ceiling("matmul_tflops") / 1e9,
                                                reqs.what)
                if impossible:
                    raise CheckFailed(impossible)
                perf.ms[(name, N, causal)] = ms
                perf.peak[(name, N, causal)] = reqs.peak_bytes
                del reqs
            except (CheckFailed, errors.StudentProblem) as e:
                perf.failed[name] = e
        torch.cuda.empty_cache()
    sub.close()
    return perf


def _compare_fwd(out, expected, case, what):
    from grader.judge import gpu as g

    o, lse = _pair(out, what)
    g.assert_close_gpu(o, expected[0], what=f"the o of {what}", dtype="float16", case=case)
    g.assert_close_gpu(lse, expected[1], what=f"the lse of {what}", dtype="float32", case=case,
                       atol=LSE_TOL["float16"] * max(1.0, float(expected[1].abs().max())),
                       rtol=LSE_TOL["float16"])


def _compare_grads(out, expected, case, what):
    """A timed call's gradients in full, against float32: within 1% of the largest magnitude
    (the 2 x PyTorch rule is gpu_real_sizes' business; here a skipped or stale call shows)."""
    from grader.judge import gpu as g

    for name, x, r in zip(("dq", "dk", "dv"), _pair(out, what), expected):
        g.assert_close_gpu(x, r, what=f"the {name} of {what}", dtype="float16", case=case,
                           atol=1e-2 * max(1.0, float(r.abs().max())), rtol=1e-2)


def _speed(perf: _Perf, name: str, credit, gpu) -> None:
    from grader.judge.devices import linear_credit

    perf.failure([name])
    prof = gpu.profile
    fractions, lines = [], []
    for N in PERF_N:
        for causal in (False, True):
            ms = perf.ms[(name, N, causal)]
            base_ms, backend = perf.base[(N, causal)][name]
            if not (base_ms < float("inf")):   # fail closed: no baseline, no credit
                raise CheckFailed(f"no SDPA backend ran at N={N}{', causal' if causal else ''} "
                                  f"here, so there is no baseline to compare with; no speed points")
            ratio = ms / base_ms
            fractions.append(linear_credit(ratio, prof.flash_full_ratio, prof.flash_zero_ratio))
            tflops = _flops(N, causal, name == "bwd") / ms / 1e9
            lines.append(f"N={N}{' causal' if causal else ''}: {ms:.3f} ms ({tflops:.0f} TFLOP/s) "
                         f"vs SDPA {backend} {base_ms:.3f} ms = {ratio:.2f}x")
    fn = "flash_fwd" if name == "fwd" else "flash_bwd"
    credit.set(sum(fractions) / len(fractions),
               f"{fn}, B={B_PERF}, H={H_PERF}, D={D_PERF}, float16: " + "; ".join(lines)
               + f". Full marks within {prof.flash_full_ratio:g}x of the fastest SDPA backend's "
               f"{'backward' if name == 'bwd' else 'forward'}, none past {prof.flash_zero_ratio:g}x; "
               f"FLOPs = 4*B*H*N^2*D{' x 2.5' if name == 'bwd' else ''}, halved when causal; every "
               f"timed output checked{perf.note}")


@pytest.mark.check("flash_backward.forward_speed")
def test_forward_speed(student, rng, gpu, credit, workers):
    _speed(_measure(student, rng, gpu, workers), "fwd", credit, gpu)


@pytest.mark.check("flash_backward.backward_speed")
def test_backward_speed(student, rng, gpu, credit, workers):
    _speed(_measure(student, rng, gpu, workers), "bwd", credit, gpu)


@pytest.mark.check("flash_backward.causal_skips_blocks")
def test_causal_skips_blocks(student, rng, gpu, credit, workers):
    from grader.judge.devices import linear_credit

    perf = _measure(student, rng, gpu, workers)
    perf.failure(["fwd", "bwd"])
    fractions, lines = [], []
    N = PERF_N[-1]   # at 4K the per-call costs around the kernel weigh: cuDNN's own ratio is 0.62-0.66
    for name, fn in (("fwd", "flash_fwd"), ("bwd", "flash_bwd")):
        if True:
            ratio = perf.ms[(name, N, True)] / perf.ms[(name, N, False)]
            fractions.append(linear_credit(ratio, CAUSAL_FULL, CAUSAL_ZERO))
            lines.append(f"{fn} N={N}: causal {perf.ms[(name, N, True)]:.3f} ms / non-causal "
                         f"{perf.ms[(name, N, False)]:.3f} ms = {ratio:.2f}")
    credit.set(sum(fractions) / len(fractions),
               "; ".join(lines) + f". Causal attention does half the work: full marks at "
               f"{CAUSAL_FULL:g} of the non-causal time or less, none from {CAUSAL_ZERO:g}")


@pytest.mark.check("flash_backward.memory_linear")
def test_memory_linear(student, rng, gpu, credit, workers):
    from grader.judge import gpu as g

    perf = _measure(student, rng, gpu, workers)
    perf.failure(["fwd", "bwd"])
    passed, lines = 0, []
    for N in PERF_N:
        q_bytes = B_PERF * H_PERF * N * D_PERF * 2
        outputs = {"fwd": q_bytes + B_PERF * H_PERF * N * 4, "bwd": 3 * q_bytes}
        allowed = EXTRA_COPIES * q_bytes + EXTRA_MIB * g.MIB
        naive = 2 * B_PERF * H_PERF * N * N * 2     # S and P in fp16, what naive would add
        for name, fn in (("fwd", "flash_fwd"), ("bwd", "flash_bwd")):
            extra = max(perf.peak[(name, N, c)] for c in (False, True)) - outputs[name]
            passed += extra <= allowed
            lines.append(f"{fn} N={N}: {extra / g.MIB:.0f} MiB beyond its outputs")
    credit.set(passed / (2 * len(PERF_N)),
               "; ".join(lines) + f" (allowed: {EXTRA_COPIES} tensors the size of q + "
               f"{EXTRA_MIB} MiB, {EXTRA_COPIES * 64 + EXTRA_MIB} MiB at N=8192; an N x N score "
               f"matrix in fp16 adds {2 * B_PERF * H_PERF * 8192 ** 2 * 2 / 2**30:.0f} GiB there)")
