"""flash_triton's adversarial checks (lesson: "Break It" 2 and 3) under the Triton interpreter:
no access past the end of q, k, v or the output, padded keys with no weight, the row max in the
last key block, scores past exp's range, and the kernel-use gate.

Only `guard_bands` judges the out-of-bounds lanes the bounds hooks record (judging.py says how),
and only `guard_bands` and `padded_keys_masked` here use N that is not a multiple of the blocks.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.exercises.flash_triton.judging import describe, flash_call, flash_case
from grader.exercises.flash_triton.reference import qkv
from grader.judge.answers import diagnose, reference
from grader.judge.answers.cases import run_cases
from grader.judge.answers.compare import assert_right_answer, assert_shape
from grader.judge.answers.inputs import randn, round_to
from grader.judge.evidence.kernel_use import assert_in_bounds, assert_kernel_wrote

# the checks whose ideas explain a wrong answer in a property check's call, in the order the
# report should name the first that failed (compare.assert_right_answer)
ANSWER_CHECKS = ("flash_triton.matches_reference", "flash_triton.max_in_last_block",
                 "flash_triton.large_scores", "flash_triton.padded_keys_masked",
                 "flash_triton.ragged_n")

MASK_HINTS = {
    "tl.load": "Break It 3: mask the K and V loads of the last key block on cols < N (and the Q "
               "load on rows < N). A load without mask= reads past the end of the tensor even "
               "when tl.where sets those scores to -inf afterwards.",
    "tl.store": "Mask the O store on rows < N: tl.store(..., mask=rows[:, None] < N). The last "
                "query block is partial, and without the mask it writes past the end of the "
                "output.",
}


@pytest.mark.check("flash_triton.guard_bands")
def test_guard_bands(student, rng):
    sub = student()
    # Every lane of every load and store is checked against q, k, v and the output: the last
    # (batch, head) of each input ends where its memory ends, and so does the output.
    cases = [
        ((1, 1, 100, 16), dict(BLOCK_M=64, BLOCK_N=64)),    # the last block holds 36 keys of 64
        ((2, 2, 50, 16), dict(BLOCK_M=32, BLOCK_N=32)),
    ]
    for shape, blocks in cases:
        q, k, v = qkv(rng, shape)
        r = flash_call(sub, q, k, v, **blocks)
        what = f"flash_fwd(q, k, v) ({describe(q, 'float16', case='', **blocks)}) [seed {rng.seed}]"
        assert_in_bounds(r, ["q", "k", "v"], what, MASK_HINTS)
        # staying in bounds by storing nothing (a stub), or zeros, earns nothing
        assert_kernel_wrote(r.extras, r.value, q.size, what, "_flash_fwd")
        assert_right_answer(r.value, reference.attention(q, k, v), prop="stayed in bounds",
                            follows=ANSWER_CHECKS, what="flash_fwd(q, k, v)", dtype="float16",
                            case=describe(q, "float16", case="", **blocks), seed=rng.seed)


@pytest.mark.check("flash_triton.padded_keys_masked")
def test_padded_keys_masked(student, rng, credit):
    sub = student()
    # Every real score is negative (q > 0, k < 0 in every coordinate): a padded key loaded as
    # zeros scores 0, above all of them, and without the -inf it takes most of the weight.
    cases = []
    for shape, blocks in (((1, 2, 17, 16), dict(BLOCK_M=64, BLOCK_N=64)),    # 47 padded keys
                          ((1, 1, 100, 16), dict(BLOCK_M=32, BLOCK_N=64))):  # 28 in the last block
        q, k = _negative_scores(rng, shape, blocks["BLOCK_N"])
        v = randn(rng, shape, "float16")
        cases.append(flash_case(sub, q, k, v, rng.seed, case="all real scores < 0", **blocks))
    run_cases(credit, cases)


def _negative_scores(rng, shape, block_n):
    """q > 0 and k < 0 in every coordinate, and every row's max real score in the first key
    block by a margin (its keys are half as long; drawn again otherwise): among real keys the
    max never moves, so a kernel that forgets to rescale acc (max_in_last_block's idea) is
    judged here on its masks alone, the same on every draw. (With keys of one length, the
    shortest key is every row's max, in the first block in about 2 draws of 3.)"""
    for _ in range(100):
        q = round_to(np.abs(rng.standard_normal(shape)) + 0.5, "float16")
        k = -np.abs(rng.standard_normal(shape)) - 0.5
        k[..., :block_n, :] *= 0.5
        k = round_to(k, "float16")
        s = q @ np.swapaxes(k, -1, -2)
        if shape[-2] <= block_n or (s[..., :block_n].max(-1) > s[..., block_n:].max(-1) + 1).all():
            break
    return q, k


@pytest.mark.check("flash_triton.max_in_last_block")
def test_max_in_last_block(student, rng, credit):
    sub = student()
    # Break It 2: coordinate 0 adds 4 * 8 / sqrt(16) = 8 to the scores of the keys in the last
    # key block only, so every row's max moves there at the last step and the earlier blocks'
    # weights must shrink by ~e^-6: exactly what acc * alpha does.
    cases = []
    for shape, blocks in (((1, 2, 96, 16), dict(BLOCK_M=32, BLOCK_N=32)),   # last block: 64..95
                          ((1, 1, 128, 16), dict(BLOCK_M=32, BLOCK_N=64))):  # last block: 64..127
        q, k, v = qkv(rng, shape)
        N, block_n = shape[2], blocks["BLOCK_N"]
        last = (N - 1) // block_n * block_n
        q[..., 0] = 4.0
        k[..., 0] = 0.0
        k[..., last:, 0] = 8.0
        case = f"row max in the last key block, keys {last}..{N - 1}"
        cases.append(flash_case(sub, q, k, v, rng.seed, case=case, **blocks))
    run_cases(credit, cases)


@pytest.mark.check("flash_triton.large_scores")
def test_large_scores(student, rng, credit):
    sub = student()
    shape, blocks = (1, 2, 96, 16), dict(BLOCK_M=32, BLOCK_N=32)

    def scores(first: float, later: float):
        """q, k with coordinate 0 setting every score near `first` in the first key block and
        near `later` in the others (the rest of q and k is randn * 0.5): the row max stays in
        the first block, so this check is about the running max keeping exp in range, not
        about rescaling when it moves (max_in_last_block)."""
        q = randn(rng, shape, "float16", 0.5)
        k = randn(rng, shape, "float16", 0.5)
        c = 10.0 if first < 0 else 35.0
        q[..., 0] = c
        k[..., :blocks["BLOCK_N"], 0] = round_to(np.array(first * 4 / c), "float16")
        k[..., blocks["BLOCK_N"]:, 0] = round_to(np.array(later * 4 / c), "float16")
        return q, k, randn(rng, shape, "float16")

    # scores near 300: past float32 exp's overflow at 88.7, so exp(s) without the running max
    # is inf and inf / inf is nan
    def overflowed(out, expected):
        if diagnose.blew_up(out, expected):
            return ("NaN or inf where the answer is finite, with scores up to ~300: exp(s) "
                    "overflows float32 past 88.7 and inf / inf is NaN. Subtract the running max: "
                    "p = exp(s - m_new[:, None]), m_new = max(m_i, max of the block's scores).")
        return ""

    def underflowed(out, expected):
        if diagnose.zero_or_nan_where_wrong(out, expected, *diagnose.tolerance("float16")):
            return ("Every score here is far below 0 (about -95 to -25), and every wrong output "
                    "is 0 or NaN: exp(s - m) underflowed to 0, as it does when the running max "
                    "stays above every score. A running max that starts at 0 does that: start "
                    "m_i at -inf (tl.full([BLOCK_M], float('-inf'), tl.float32)).")
        return ""

    big = flash_case(sub, *scores(300.0, 0.0), rng.seed, case="scores up to ~300",
                     explain=overflowed, **blocks)
    # every score strongly negative (about -30, and -90 past the first block): a running max
    # that starts at 0 instead of -inf never moves, and exp(s - 0) rounds to 0 in float16
    negative = flash_case(sub, *scores(-30.0, -90.0), rng.seed, explain=underflowed,
                          case="every score between about -95 and -25", **blocks)
    run_cases(credit, [big, negative])


@pytest.mark.check("flash_triton.uses_kernel")
def test_uses_kernel(student, rng):
    # The gate (grader.fixtures.ProvingSubmission) records torch ops below the dispatcher (SDPA shows as
    # _scaled_dot_product_*, matmul as bmm); the audit refuses threads, processes and NumPy in
    # this exercise. The answer must also be right: a kernel that computes nothing (a stub with
    # its raise deleted) earns nothing here either.
    sub = student()
    q, k, v = qkv(rng, (1, 2, 64, 16))
    r = flash_call(sub, q, k, v, BLOCK_M=32, BLOCK_N=32)
    assert_kernel_wrote(r.extras, r.value, q.size, "flash_fwd(q, k, v)", "_flash_fwd")
    assert_shape(r.value, q.shape, what="flash_fwd(q, k, v)", dtype="float16")
    assert_right_answer(r.value, reference.attention(q, k, v), prop="launched the kernel",
                        follows=ANSWER_CHECKS, what="flash_fwd(q, k, v)", dtype="float16",
                        case="B=1, H=2, N=64, D=16, BLOCK_M=BLOCK_N=32", seed=rng.seed)
