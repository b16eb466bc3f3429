"""Checks for exercises/flash_triton.py (lesson: "FlashAttention's forward pass", "Build It"
flash_triton.py, "Break It" 2 and 3).

The kernel runs under the Triton interpreter (TRITON_INTERPRET=1, CPU tensors) in these layers,
so shapes are small and few: each (query block, key block) step costs a few ms there. Every
check draws fresh inputs from `rng` (float16, one float32 case; the interpreter's tl.dot has no
bfloat16), computes the float64 reference here from the exact rounded values, and compares the
whole (B, H, N, D) output; its dtype must be the input dtype.

Memory behind the inputs: the wrapper's reshape(B*H, N, D).contiguous() of a contiguous input is
a view, so an unmasked K/V load of the last key block reads the next head's rows, and past the
last head whatever lies behind the tensor. Every input here carries a guard band of
max(BLOCK_M, BLOCK_N) * D elements (the furthest an unmasked tile can reach), so what an
unmasked load reads is chosen by the check: NaN where the masks are the point (ragged_n,
guard_bands), zeros elsewhere, so that each check fails for its own idea only.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader import reference
from grader.compare import CheckFailed, assert_close, assert_shape
from grader.inputs import randn, round_to, tensor

# aten ops a wrapper may run around the launch: allocation, views, copies and dtype casts (the
# interpreter itself adds new_empty/set_/copy_ to move arguments). Anything else computes.
ALLOWED_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "full", "full_like", "new_full", "fill_", "zero_", "resize_", "set_",
    "copy_", "clone", "_to_copy", "contiguous", "detach", "alias", "lift_fresh",
    "lift_fresh_copy", "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided",
    "expand", "transpose", "t", "permute", "unsqueeze", "squeeze", "select", "slice",
    "narrow", "unbind", "split",
})


def _qkv(rng, shape, dtype="float16", scale=1.0):
    """q, k, v: (B, H, N, D) arrays holding values exact in `dtype`."""
    return tuple(randn(rng, shape, dtype, scale) for _ in range(3))


def _flash(sub, q, k, v, *, dtype="float16", poison=float("nan"), BLOCK_M=64, BLOCK_N=64,
           case="", seed=None):
    """Run flash_fwd on (q, k, v) with guard bands of `poison` and check the whole output."""
    D = q.shape[-1]
    guard = max(BLOCK_M, BLOCK_N) * D
    args = [tensor(t, dtype, guard=guard, poison=poison) for t in (q, k, v)]
    out = sub.flash_fwd(*args, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    B, H, N, _ = q.shape
    case = ", ".join(x for x in (f"B={B}, H={H}, N={N}, D={D}, BLOCK_M={BLOCK_M}, "
                                 f"BLOCK_N={BLOCK_N}, {dtype}", case) if x)
    assert_close(out, reference.attention(q, k, v), what="flash_fwd(q, k, v)", dtype=dtype,
                 case=case, seed=seed)


@pytest.mark.check("flash_triton.matches_reference")
def test_matches_reference(student, rng):
    sub = student()
    # every case has N > BLOCK_N, so the online softmax really merges several key blocks
    cases = [  # (B, H, N, D), dtype, blocks
        ((2, 2, 80, 16), "float16", dict(BLOCK_M=64, BLOCK_N=32)),
        ((2, 3, 48, 32), "float16", dict(BLOCK_M=32, BLOCK_N=16)),
        ((1, 2, 64, 64), "float16", dict(BLOCK_M=32, BLOCK_N=32)),
        ((2, 1, 40, 128), "float16", dict(BLOCK_M=16, BLOCK_N=16)),
        ((1, 2, 72, 32), "float32", dict(BLOCK_M=32, BLOCK_N=32)),
    ]
    for shape, dtype, blocks in cases:
        q, k, v = _qkv(rng, shape, dtype)
        _flash(sub, q, k, v, dtype=dtype, poison=0.0, seed=rng.seed, **blocks)


@pytest.mark.check("flash_triton.ragged_n")
def test_ragged_n(student, rng):
    sub = student()
    cases = [  # (B, H, N, D), blocks; NaN behind every input, so an unmasked tail shows
        ((1, 1, 1000, 16), dict(BLOCK_M=64, BLOCK_N=64)),   # 15 full key blocks and 40 keys
        ((1, 2, 17, 32), dict(BLOCK_M=64, BLOCK_N=64)),     # N smaller than one block
        ((1, 1, 1, 16), dict(BLOCK_M=64, BLOCK_N=64)),      # a single query and key
        ((1, 2, 100, 16), dict(BLOCK_M=32, BLOCK_N=64)),    # BLOCK_M < BLOCK_N
        ((1, 1, 100, 32), dict(BLOCK_M=64, BLOCK_N=16)),    # BLOCK_M > BLOCK_N
    ]
    for shape, blocks in cases:
        q, k, v = _qkv(rng, shape)
        _flash(sub, q, k, v, case="NaN behind the inputs", seed=rng.seed, **blocks)


@pytest.mark.check("flash_triton.guard_bands")
def test_guard_bands(student, rng):
    sub = student()
    # Only the last (batch, head) ends at the poison: the others' tails run into the next
    # head's rows. One head with a short last block, then several heads and several blocks.
    cases = [
        ((1, 1, 100, 16), dict(BLOCK_M=64, BLOCK_N=64)),    # the last block holds 36 keys of 64
        ((2, 2, 50, 16), dict(BLOCK_M=32, BLOCK_N=32)),
    ]
    for shape, blocks in cases:
        q, k, v = _qkv(rng, shape)
        _flash(sub, q, k, v, case="NaN right behind q, k and v in memory", seed=rng.seed,
               **blocks)


@pytest.mark.check("flash_triton.padded_keys_masked")
def test_padded_keys_masked(student, rng):
    sub = student()
    # Every real score is negative (q > 0, k < 0 in every coordinate): a padded key loaded as
    # zeros scores 0, above all of them, and without the -inf it takes most of the weight.
    # Zeros behind the inputs: an unmasked load reads the same zeros as a masked one, so this
    # check fails for the missing -inf only.
    cases = [
        ((1, 2, 17, 16), dict(BLOCK_M=64, BLOCK_N=64)),     # 47 padded keys
        ((1, 1, 100, 16), dict(BLOCK_M=32, BLOCK_N=64)),    # 28 padded keys in the last block
    ]
    for shape, blocks in cases:
        q = round_to(np.abs(rng.standard_normal(shape)) + 0.5, "float16")
        k = round_to(-np.abs(rng.standard_normal(shape)) - 0.5, "float16")
        v = randn(rng, shape, "float16")
        _flash(sub, q, k, v, poison=0.0, case="all real scores < 0", seed=rng.seed, **blocks)


@pytest.mark.check("flash_triton.max_in_last_block")
def test_max_in_last_block(student, rng):
    sub = student()
    # Break It 2: coordinate 0 adds 4 * 8 / sqrt(16) = 8 to the scores of the keys in the last
    # key block only, so every row's max moves there at the last step and the earlier blocks'
    # weights must shrink by ~e^-6: exactly what acc * alpha does.
    cases = [
        ((1, 2, 100, 16), dict(BLOCK_M=64, BLOCK_N=32)),    # last block: keys 96..99
        ((1, 1, 128, 16), dict(BLOCK_M=32, BLOCK_N=64)),    # last block: keys 64..127
    ]
    for shape, blocks in cases:
        q, k, v = _qkv(rng, shape)
        N, block_n = shape[2], blocks["BLOCK_N"]
        last = (N - 1) // block_n * block_n
        q[..., 0] = 4.0
        k[..., 0] = 0.0
        k[..., last:, 0] = 8.0
        _flash(sub, q, k, v, poison=0.0, seed=rng.seed,
               case=f"row max in the last key block, keys {last}..{N - 1}", **blocks)


@pytest.mark.check("flash_triton.large_scores")
def test_large_scores(student, rng):
    sub = student()
    # q, k ~ 10 * randn, D = 16: scores ~ +-100 and row maxima ~ 250, past float32 exp's
    # overflow at 88.7, so exp(s) without the running max is inf and inf / inf is nan.
    shape = (1, 2, 100, 16)
    q, k = (randn(rng, shape, "float16", 10.0) for _ in range(2))
    v = randn(rng, shape, "float16")
    _flash(sub, q, k, v, poison=0.0, BLOCK_M=64, BLOCK_N=32,
           case="q, k scaled by 10: scores up to ~300", seed=rng.seed)


@pytest.mark.check("flash_triton.uses_kernel")
def test_uses_kernel(student, rng):
    sub = student()
    q, k, v = _qkv(rng, (1, 2, 40, 16))
    r = sub.call("flash_fwd", *(tensor(t, "float16") for t in (q, k, v)), opts={"trace": True})
    ops = list(r.extras.get("ops", []))
    launches = int(r.extras.get("launches", 0))
    computing = sorted(set(ops) - ALLOWED_OPS)
    if launches < 1:
        raise CheckFailed(f"flash_fwd(q, k, v) launched no Triton kernel; the torch ops it ran: "
                          f"{', '.join(ops) or 'none'}. The attention must be computed by "
                          f"_flash_fwd[grid](...).")
    if computing:
        raise CheckFailed(f"flash_fwd(q, k, v) computed with PyTorch around its kernel: "
                          f"{', '.join(computing)}. Only allocations, views and copies may run "
                          f"in the wrapper; the attention itself must come from _flash_fwd.")
    # the values are the other checks' business; here only that a tensor came back
    assert_shape(r.value, q.shape, what="flash_fwd(q, k, v)", dtype="float16")
