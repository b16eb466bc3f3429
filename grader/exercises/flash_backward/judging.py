"""How flash_backward's checks call the student and judge the answers: the calls of flash_fwd
and flash_bwd on guarded tensors, the full comparison of o and L with float64 (and the hint its
evidence supports), o and the gradients under flash-attention's rule (compare.assert_close's
`baseline`): the error against float64 may be at most compare.BASELINE_MULT times that of a
same-precision PyTorch implementation (computed here, on the same inputs), plus a floor. 2x
(flash-attention's own) left a correct kernel that forms D = rowsum(dO * O) in float16 within
~1.5x of the bound in the causal rows that see few keys (their |D| is largest), so one draw
could flip it on a GPU. The check modules and the hidden checks import these.

The gradients are judged by two helpers, assert_grads (CPU references, for the interp layer)
and assert_grads_gpu (GPU references, for the gpu layer). They share the tolerance rule
but not their evidence: on an overflowing PyTorch baseline the first falls back
on float32 PyTorch and the second on the floor alone; the first stops at the first wrong
gradient, the second compares all three for the hint that names a race on dQ. The first's
hint comes from mistakes.py: the known mistake whose answer the gradients equal, else which
gradient differs and where."""

from __future__ import annotations

import numpy as np

from grader import errors
from grader.exercises.flash_backward import mistakes
from grader.exercises.flash_backward.mistakes import (DIAGONAL_HINT, DQ_ONLY_HINT, LSE_IS_M_HINT,
                                                      LSE_LOG2_HINT, LSE_NO_M_HINT, SCALE_HINT,
                                                      STRICT_HINT)
from grader.exercises.flash_backward.reference import (backward_reference, forward_reference,
                                                       torch_float32_rounded, torch_same_precision)
from grader.judge.answers.compare import CheckFailed, assert_close, baseline_floor, values
from grader.judge.answers.inputs import round_to, tensor
from grader.judge.evidence.kernel_use import KERNELS as GATED

# flash_fwd and flash_bwd go through the kernel-use gate (grader.fixtures.ProvingSubmission): a Triton
# launch, and no computing torch op around it.
FWD_GATE = GATED["flash_backward"]["flash_fwd"]
BWD_GATE = GATED["flash_backward"]["flash_bwd"]
LSE_TOL = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-5}   # atol = rtol on L (float32)


# ------------------------------------------------------------------------------ calls


def describe(shape, dtype, causal, blocks, case=""):
    """The case label of a call: shape, block sizes, dtype, causal, and what the case tests."""
    B, H, N, D = shape
    b = ", ".join(f"{k}={v}" for k, v in blocks.items())
    return ", ".join(x for x in (f"B={B}, H={H}, N={N}, D={D}", b, dtype,
                                 "causal" if causal else "", case) if x)


def guard(shape, blocks):
    """Poisoned elements behind each input: more than any tile an unmasked load can reach."""
    return max(blocks.get("BLOCK_M", 64), blocks.get("BLOCK_N", 64), 64) * shape[-1]


def call_fwd(sub, q, k, v, dtype, causal, blocks, opts=None):
    args = [tensor(t, dtype, guard=guard(q.shape, blocks)) for t in (q, k, v)]
    return sub.call("flash_fwd", *args, causal=causal, **blocks,
                    opts={"poison_empty": True, **(opts or {})})


def call_bwd(sub, q, k, v, o, lse, do, dtype, causal, blocks, opts=None):
    g = guard(q.shape, blocks)
    args = [*(tensor(t, dtype, guard=g) for t in (q, k, v, o)),
            tensor(lse, "float32", guard=g), tensor(do, dtype, guard=g)]
    return sub.call("flash_bwd", *args, causal=causal, **blocks,
                    opts={"poison_empty": True, **(opts or {})})


def unpack(got, what):
    """The (o, lse) or (dq, dk, dv) a call returned, as a tuple of the expected length."""
    n = 2 if what.startswith("flash_fwd") else 3
    if not isinstance(got, (tuple, list)) or len(got) != n:
        raise CheckFailed(f"{what}: expected a tuple of {n} tensors, got {type(got).__name__}"
                          + (f" of length {len(got)}" if isinstance(got, (tuple, list)) else ""))
    return got


# ------------------------------------------------------------------------------ the forward


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
    r = call_fwd(sub, q, k, v, dtype, causal, blocks, opts)
    judge_forward(r.value, q, k, v, dtype, causal, describe(q.shape, dtype, causal, blocks, case), seed)
    return r.extras


def judge_forward(value, q, k, v, dtype, causal, context, seed) -> None:
    """flash_fwd's returned (o, L) against float64 in full, with the hint its evidence supports."""
    what = f"flash_fwd(q, k, v, causal={causal})"
    o, lse = unpack(value, what)
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
            elif np.allclose(got, m, rtol=1e-3, atol=1e-3):
                hint = LSE_IS_M_HINT
            elif causal:
                _, strict_L, _ = forward_reference(q, k, v, causal, strict=True)
                if np.allclose(got[..., 1:], strict_L[..., 1:], rtol=1e-2, atol=1e-2):
                    hint = STRICT_HINT
        raise CheckFailed(str(e), hint=hint) from None
    try:   # flash-attention's rule: a multiple of PyTorch's own error in `dtype`, plus a floor
        assert_close(o, ref_o, what=f"the o of {what}", dtype=dtype, case=context, seed=seed,
                     baseline=torch_same_precision(q, k, v, None, dtype, causal)[0])
    except CheckFailed as e:
        got = np.asarray(values(o), dtype=np.float64)
        hint = ""
        if causal and got.shape == ref_o.shape:
            strict_o, _, _ = forward_reference(q, k, v, causal, strict=True)
            if np.allclose(got[..., 1:, :], strict_o[..., 1:, :], rtol=1e-2, atol=1e-2):
                hint = STRICT_HINT
        raise CheckFailed(str(e), hint=hint) from None


# ------------------------------------------------------------------------------ the gradients


def assert_grads(got, q, k, v, do, dtype, causal, what, context, seed, blocks=None):
    """dq, dk, dv against float64, each within BASELINE_MULT x PyTorch's same-precision error
    plus a floor (grads_floor: BASELINE_FLOOR x the largest of the three gradients).

    Where PyTorch in `dtype` is not finite (float16 with a large dO: its float16 dP = dO V^T
    passes 65504, and inf - inf gives NaN), its error would allow anything, NaN included. The
    baseline is then PyTorch in float32 on the same inputs, rounded to `dtype`: the error a
    kernel that keeps dP and dS in float32, as tl.dot gives them, cannot avoid."""
    ref = backward_reference(q, k, v, do, causal)
    base = torch_same_precision(q, k, v, do, dtype, causal)[1:]
    floor = grads_floor(dtype, [float(np.abs(r).max()) if r.size else 0.0 for r in ref])
    upcast = None
    for i, (name, g, r) in enumerate(zip(("dq", "dk", "dv"), got, ref)):
        source, b = f"PyTorch in {dtype}", base[i]
        if not np.isfinite(b).all():
            upcast = upcast or torch_float32_rounded(q, k, v, do, dtype, causal)
            b = upcast[i]
            source = (f"the error of PyTorch in float32 rounded to {dtype} (PyTorch's {dtype} "
                      f"{name} is not finite here)")
        try:
            assert_close(g, r, what=f"the {name} of {what}", dtype=dtype, case=context, seed=seed,
                         baseline=b, floor=floor)
        except CheckFailed as e:
            blocks = blocks or {}
            hint = mistakes.grad_hint(got, q, k, v, do, causal, blocks.get("BLOCK_M"),
                                      blocks.get("BLOCK_N"))
            note = f" (the baseline: {source})" if upcast is not None else ""
            raise CheckFailed(f"{e}{note}", hint=hint) from None


def grads_floor(dtype: str, largest: list[float]) -> float:
    """The floor of the rule for dq, dk and dv alike (compare.baseline_floor), scaled by the
    largest of the three gradients instead of each one's own. dq and dk are sums of terms that can cancel to exactly 0 (at
    N = 1, dS = P (dP - D) is 0 for any dO), and PyTorch's error is 0 there too; a correct
    kernel's rounding of D or dP still scales with the terms, which dv's size measures."""
    return baseline_floor(dtype, max(largest, default=0.0))


def check_backward(sub, q, k, v, do, dtype, causal, blocks, seed, case="", opts=None):
    """flash_bwd on the o and L computed here, its gradients checked in full; returns the
    call's extras and the o and L it was given."""
    context = describe(q.shape, dtype, causal, blocks, case)
    what = f"flash_bwd(q, k, v, o, lse, do, causal={causal})"
    o, L, _ = forward_reference(q, k, v, causal)
    o, L = round_to(o, dtype), round_to(L, "float32")
    r = call_bwd(sub, q, k, v, o, L, do, dtype, causal, blocks, opts)
    assert_grads(unpack(r.value, what), q, k, v, do, dtype, causal, what, context, seed,
                 blocks)
    return r.extras, o, L


# ------------------------------------------------------------------------------ on the GPU
# The references run on the GPU: float32 for o and L, float64 for the gradients, and PyTorch's
# own backward in the inputs' dtype for the tolerance rule.


def gradient_hint(ok: dict) -> str:
    """For the gpu layer's full-size comparison: the hint its evidence supports, from which of
    dq, dk, dv matched ({"dq": bool, "dk": bool, "dv": bool}). Only dQ wrong on the GPU, where
    the interp checks saw it right, points at a race between programs summing dQ."""
    if not ok.get("dq", True) and ok.get("dk", False) and ok.get("dv", False):
        return DQ_ONLY_HINT
    return ""


def _gpu_grad_hint(name, x, r, D) -> str:
    """The hint one wrong gradient on the GPU supports: dq or dk sqrt(D) too large. A wrong dv
    alone names no cause here (the interp checks compare it with each known mistake's)."""
    import math

    import torch

    if not (hasattr(x, "array") and tuple(x.shape) == tuple(r.shape)):
        return ""
    mine = torch.from_numpy(x.array).to(r.device, torch.float64)
    near = torch.allclose(mine, r * math.sqrt(D), rtol=2e-2,
                          atol=2e-2 * max(1.0, float(r.abs().max())))
    if name != "dv" and near:
        return SCALE_HINT.format(name={"dq": "dQ", "dk": "dK"}[name],
                                 formula="dS K" if name == "dq" else "dS^T Q")
    return ""


def assert_grads_gpu(got, q, k, v, do, dtype, causal, what, case, seed):
    """dq, dk, dv (TensorValues) against float64 on the GPU, each within BASELINE_MULT x the
    error of PyTorch's own backward in `dtype` on the same inputs, plus a floor."""
    from grader.judge.answers import gpu as g

    got = unpack(got, what)
    ref = g.attention_grads_reference(q, k, v, do, causal)
    base = g.same_precision_grads(q, k, v, do, causal)
    floor = grads_floor(dtype, [float(r.abs().max()) if r.numel() else 0.0 for r in ref])
    failures = {}   # name -> (CheckFailed, hint): all three are compared, for the hint
    for name, x, r, b in zip(("dq", "dk", "dv"), got, ref, base):
        try:   # a PyTorch that overflowed here leaves the floor alone (compare.assert_close)
            assert_close(x, r, what=f"the {name} of {what}", dtype=dtype, case=case,
                         seed=seed, baseline=b, floor=floor)
        except CheckFailed as e:
            failures[name] = (CheckFailed(str(e)), _gpu_grad_hint(name, x, r, q.shape[-1]))
        del r, b
    if failures:
        name = next(iter(failures))
        e, hint = failures[name]
        raise CheckFailed(str(e), hint=hint or gradient_hint(
            {n: n not in failures for n in ("dq", "dk", "dv")})) from None


def assert_forward_gpu(value, q, k, v, dtype, causal, what, case, seed):
    """flash_fwd's (o, lse) against the float32 reference on the GPU, in full: o within a
    multiple of PyTorch's own error in `dtype` (gpu.same_precision_attention), plus a floor."""
    from grader.judge.answers import gpu as g

    o, lse = unpack(value, what)
    ref_o, ref_lse = g.attention_lse_reference(q, k, v, causal)
    assert_close(o, ref_o, what=f"the o of {what}", dtype=dtype, case=case, seed=seed,
                 baseline=g.same_precision_attention(q, k, v, causal))
    big = max(1.0, float(ref_lse.abs().max()))
    assert_close(lse, ref_lse, what=f"the lse of {what}", dtype="float32", case=case,
                 seed=seed, atol=LSE_TOL[dtype] * big, rtol=LSE_TOL[dtype])
    return ref_o, ref_lse
