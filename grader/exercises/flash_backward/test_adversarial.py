"""flash_backward's adversarial checks: L with large scores, dS past float16's range, every
load and store inside its tensor, and the answers computed by the student's kernels. They run
under the interpreter on small shapes, like the interp checks (test_interp.py), and judge the
values with the same helpers (judging.py)."""

from __future__ import annotations

import numpy as np
import pytest

from grader import errors
from grader.exercises.flash_backward.mistakes import DS_PRECISION_HINT, MASK_HINTS
from grader.exercises.flash_backward.judging import (BWD_GATE, FWD_GATE, assert_grads, call_bwd,
                                                     call_fwd, check_backward, check_forward,
                                                     describe, judge_forward, unpack)
from grader.exercises.flash_backward.reference import forward_reference, qkv
from grader.judge.answers import reference
from grader.judge.answers.compare import CheckFailed, answer_must_be_right, assert_shape, values
from grader.judge.answers.inputs import randn, round_to, tensor
from grader.judge.evidence.kernel_use import assert_in_bounds, assert_kernel_wrote

VALUE_CHECKS = ("flash_backward.forward_matches_float64", "flash_backward.lse_includes_m",
                "flash_backward.causal_mask", "flash_backward.backward_matches_float64",
                "flash_backward.backward_causal")
# the checks whose ideas explain a wrong answer in a property check's call (the first that
# failed leads; compare.answer_must_be_right)
FORWARD_CHECKS = VALUE_CHECKS[:3]
BACKWARD_CHECKS = VALUE_CHECKS[3:]


@pytest.mark.check("flash_backward.lse_includes_m")
def test_lse_includes_m(student, rng):
    sub = student()
    # q, k ~ 6 * randn, D = 16: scores ~ 36 * randn, row maxima ~ 100, far from log(l) <= log(N)
    shape, blocks = (1, 2, 40, 16), dict(BLOCK_M=16, BLOCK_N=16)
    q, k, v = qkv(rng, shape, "float16", scale=6.0)
    check_forward(sub, q, k, v, "float16", False, blocks, rng.seed, case="q, k scaled: large scores")
    # and x 0.3: nearly flat scores, so log(l) ~ log(N) = 3.7, far past the tolerance, where
    # with large scores one score can dominate its row (l ~ 1, log(l) ~ 0): L = m alone fails here
    q, k, v = qkv(rng, shape, "float16", scale=0.3)
    check_forward(sub, q, k, v, "float16", False, blocks, rng.seed, case="q, k scaled down: flat scores")


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


@pytest.mark.check("flash_backward.masked_accesses")
def test_masked_accesses(student, rng):
    sub = student()
    # N ragged for every block size: the last (batch, head) of each tensor ends where its
    # memory ends; the bounds hooks record every lane past it (grader/worker/bounds.py)
    shape, blocks = (1, 1, 50, 16), dict(BLOCK_M=32, BLOCK_N=16)
    for causal in (False, True):
        q, k, v = qkv(rng, shape)
        r = call_fwd(sub, q, k, v, "float16", causal, blocks)
        what = f"flash_fwd(q, k, v, causal={causal}) ({describe(shape, 'float16', causal, blocks)})"
        assert_in_bounds(r, ["q", "k", "v"], what, MASK_HINTS)
        wrote(r, what, "_flash_fwd", 2)
        context = describe(shape, "float16", causal, blocks)
        with answer_must_be_right("stayed in bounds", FORWARD_CHECKS):
            judge_forward(r.value, q, k, v, "float16", causal, context, rng.seed)
        o, L, _ = forward_reference(q, k, v, causal)
        do = randn(rng, shape, "float16")
        r = call_bwd(sub, q, k, v, o, L, do, "float16", causal, blocks)
        what = f"flash_bwd(q, k, v, o, lse, do, causal={causal}) ({context})"
        assert_in_bounds(r, ["q", "k", "v", "o", "lse", "do"], what, MASK_HINTS)
        wrote(r, what, "_bwd_dkdv and _bwd_dq", 3)
        with answer_must_be_right("stayed in bounds", BACKWARD_CHECKS):
            assert_grads(unpack(r.value, what), q, k, v, do, "float16", causal,
                         f"flash_bwd(q, k, v, o, lse, do, causal={causal})", context, rng.seed)


def wrote(r, what: str, launch: str, n: int) -> None:
    """Staying in bounds, or launching, by computing nothing earns nothing: every output of the
    call (o and lse, or dq, dk and dv) was stored in full by a kernel, all finite."""
    for name, t in zip(("o", "lse") if n == 2 else ("dq", "dk", "dv"), unpack(r.value, what)):
        size = int(np.asarray(values(t)).size)
        assert_kernel_wrote(r.extras, t, size, f"the {name} of {what}", launch)


@pytest.mark.check("flash_backward.uses_kernel")
def test_uses_kernel(student, rng):
    sub = student()
    shape = (1, 2, 40, 16)
    q, k, v = qkv(rng, shape)
    opts = {"trace": True, "poison_empty": True}
    r = sub.call("flash_fwd", *(tensor(t, "float16") for t in (q, k, v)), opts=opts)
    o, L, _ = forward_reference(q, k, v)
    do = randn(rng, shape, "float16")
    r2 = sub.call("flash_bwd", *(tensor(t, "float16") for t in (q, k, v, o)), tensor(L, "float32"),
                  tensor(do, "float16"), opts=opts)
    try:
        wrote(r, FWD_GATE[0], "_flash_fwd", 2)
        wrote(r2, BWD_GATE[0], "_bwd_dkdv and _bwd_dq", 3)
    except CheckFailed as e:
        # kernels that ran but left NaN or unstored elements: a wrong value, the value checks'
        # business when they fail too
        e.follows = VALUE_CHECKS
        raise
    # the dtype the wrapper allocates, and answers right: launching kernels that compute
    # something else earns nothing either
    assert_shape(unpack(r2.value, BWD_GATE[0])[2], shape, what=BWD_GATE[0], dtype="float16")
    context = describe(shape, "float16", False, {})
    with answer_must_be_right("launched its kernels", FORWARD_CHECKS):
        judge_forward(r.value, q, k, v, "float16", False, context, rng.seed)
    with answer_must_be_right("launched its kernels", BACKWARD_CHECKS):
        assert_grads(unpack(r2.value, BWD_GATE[0]), q, k, v, do, "float16", False, BWD_GATE[0],
                     context, rng.seed)
