"""Checks for exercises/flash_backward.py (extension track; lesson: "FlashAttention's forward
pass" (L = m + log(l), kept for the backward), the backward pass (recompute P = exp(S - L); the
D = rowsum(dO * O) trick) and FlashAttention-2's causal block skipping).

interp and adversarial only here: flash_fwd, flash_bwd and the autograd wrapper run under the
interpreter on small shapes (B, H <= 2, N from 17 to 100, D = 16 or 32). Every input is rounded
here to the dtype the kernel sees, so the float64 references (computed here) see exactly the
same numbers. flash_bwd is graded on the o and L computed here (o rounded to the dtype), so a
forward mistake costs the forward checks, and a backward mistake the backward ones.

The autograd wrapper runs flash_attention(q, k, v, causal).backward(g) in the worker
(grader.sandbox.probes.run's `backward` option) and gets o and q.grad, k.grad, v.grad back; the
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
                "once (the interpreter runs them one at a time, and the interp checks passed): if "
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
    # flash_attention(q, k, v, causal).backward(g) in the worker (grader.sandbox.probes.run,
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
    # memory ends; the bounds hooks record every lane past it (grader/sandbox/bounds.py)
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
