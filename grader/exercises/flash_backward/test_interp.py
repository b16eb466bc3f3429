"""flash_backward's interp checks (extension track; lesson: "FlashAttention's forward pass"
(L = m + log(l), kept for the backward), the backward pass (recompute P = exp(S - L); the
D = rowsum(dO * O) trick) and FlashAttention-2's causal block skipping).

flash_fwd, flash_bwd and the autograd wrapper run under the interpreter on small shapes (B, H <=
2, N from 17 to 100, D = 16 or 32). Every input is rounded here to the dtype the kernel sees, so
the float64 references (computed here, reference.py) see exactly the same numbers. flash_bwd is
graded on the o and L computed here (o rounded to the dtype), so a forward mistake costs the
forward checks, and a backward mistake the backward ones. o and the gradients are judged by
flash-attention's rule (judging.assert_grads, compare.assert_close's `baseline`): within a
multiple of the error of a same-precision PyTorch implementation, plus a floor.

The autograd wrapper runs flash_attention(q, k, v, causal).backward(g) in the worker
(grader.worker.probes.run's `backward` option) and gets o and q.grad, k.grad, v.grad back; the
kernel-use gate traces the forward and the backward alike.
"""

from __future__ import annotations

import pytest

from grader.exercises.flash_backward.judging import (assert_grads, check_backward, check_forward,
                                                     describe)
from grader.exercises.flash_backward.reference import forward_reference, qkv, torch_same_precision
from grader.judge.answers.compare import CheckFailed, assert_close
from grader.judge.answers.inputs import randn, tensor

# ------------------------------------------------------------------------------ forward


@pytest.mark.check("flash_backward.forward_matches_float64")
def test_forward_matches_float64(student, rng):
    sub = student()
    for shape, dtype, blocks in (((2, 2, 45, 32), "float16", dict(BLOCK_M=32, BLOCK_N=16)),
                                 ((1, 2, 70, 16), "float32", dict(BLOCK_M=16, BLOCK_N=32))):
        q, k, v = qkv(rng, shape, dtype)
        check_forward(sub, q, k, v, dtype, False, blocks, rng.seed)


@pytest.mark.check("flash_backward.causal_mask")
def test_causal_mask(student, rng):
    sub = student()
    # BLOCK_M != BLOCK_N both ways, and N ragged: the diagonal crosses blocks at every offset
    for shape, blocks in (((1, 2, 45, 16), dict(BLOCK_M=32, BLOCK_N=16)),
                          ((2, 1, 37, 16), dict(BLOCK_M=16, BLOCK_N=32))):
        q, k, v = qkv(rng, shape)
        check_forward(sub, q, k, v, "float16", True, blocks, rng.seed)


# ------------------------------------------------------------------------------ backward


@pytest.mark.check("flash_backward.backward_matches_float64")
def test_backward_matches_float64(student, rng):
    sub = student()
    for shape, dtype, blocks in (((2, 2, 45, 32), "float16", dict(BLOCK_M=32, BLOCK_N=16)),
                                 ((1, 2, 33, 16), "float32", dict(BLOCK_M=16, BLOCK_N=32))):
        q, k, v = qkv(rng, shape, dtype)
        do = randn(rng, shape, dtype)
        check_backward(sub, q, k, v, do, dtype, False, blocks, rng.seed)


@pytest.mark.check("flash_backward.backward_causal")
def test_backward_causal(student, rng):
    sub = student()
    for shape, blocks in (((1, 2, 45, 16), dict(BLOCK_M=16, BLOCK_N=32)),
                          ((2, 1, 40, 32), dict(BLOCK_M=32, BLOCK_N=16))):
        q, k, v = qkv(rng, shape)
        do = randn(rng, shape, "float16")
        check_backward(sub, q, k, v, do, "float16", True, blocks, rng.seed)


@pytest.mark.check("flash_backward.autograd_wrapper")
def test_autograd_wrapper(student, rng):
    sub = student()
    # flash_attention(q, k, v, causal).backward(g) in the worker (grader.worker.probes.run,
    # `backward`): o and the gradients q.grad, k.grad, v.grad come back, checked in full
    shape = (1, 2, 33, 16)
    for causal in (False, True):
        q, k, v = qkv(rng, shape)
        g = randn(rng, shape, "float16")
        what = f"flash_attention(q, k, v, causal={causal}).backward(g)"
        context = describe(shape, "float16", causal, {})
        r = sub.call("flash_attention", *(tensor(t, "float16") for t in (q, k, v, g)),
                     causal=causal, opts={"backward": {"grad_arg": 3}, "poison_empty": True})
        if not isinstance(r.value, tuple) or len(r.value) != 2:
            raise CheckFailed(f"{what}: the call returned no output and gradients")
        out, grads = r.value
        assert_close(out, forward_reference(q, k, v, causal)[0], what=f"the output of {what}",
                     dtype="float16", case=context, seed=rng.seed,
                     baseline=torch_same_precision(q, k, v, None, "float16", causal)[0])
        missing = [n for n, t in zip(("q", "k", "v"), grads) if t is None]
        if missing:
            raise CheckFailed(f"{what}: no gradient reached {', '.join(missing)}: FlashAttention."
                              f"backward must return (dq, dk, dv, None), one per input of forward",
                              hint="The autograd.Function saves q, k, v, o and L in forward "
                                   "(ctx.save_for_backward) and returns flash_bwd's (dq, dk, dv) "
                                   "from backward, plus None for causal.")
        assert_grads(grads, q, k, v, g, "float16", causal, what, context, rng.seed)
