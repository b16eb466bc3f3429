"""flash_triton's interp checks (lesson: "FlashAttention's forward pass", "Build It"
flash_triton.py): flash_fwd under the Triton interpreter against float64, at several shapes and
blocks, on float32 input, and at N that is not a multiple of the blocks.

The kernel runs under the interpreter (TRITON_INTERPRET=1, CPU tensors), so shapes are small and
few: each (query block, key block) step costs a few ms there. Every check draws fresh inputs from
`rng` (float16; float32 has its own check; the interpreter's tl.dot has no bfloat16), computes the
float64 reference here from the exact rounded values, and compares the whole (B, H, N, D)
output; its dtype must be the input dtype.

One idea per check: only `ragged_n` here (and `guard_bands` and `padded_keys_masked` among the
adversarial checks) uses N that is not a multiple of the blocks, so a kernel that is right except
for assuming full blocks loses only those (Break It 3).
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.exercises.flash_triton.judging import flash_case
from grader.exercises.flash_triton.reference import qkv, shifted_qkv
from grader.judge.answers.cases import run_cases
from grader.judge.answers.inputs import round_to


@pytest.mark.check("flash_triton.matches_reference")
def test_matches_reference(student, rng, credit):
    sub = student()
    # every case has N > BLOCK_N, so the online softmax really merges several key blocks, and
    # N a multiple of both blocks (ragged N is ragged_n's business)
    # The row max sits in the first key block (coordinate 0 adds 4 to those scores): the sums
    # over later blocks still count, but the max never moves, which is max_in_last_block's idea;
    # and no score passes ~9, so exp(s) without the max does not overflow float16 here
    # (large_scores' idea).
    cases = [  # (B, H, N, D), blocks
        ((2, 2, 64, 16), dict(BLOCK_M=64, BLOCK_N=32)),
        ((2, 3, 48, 32), dict(BLOCK_M=16, BLOCK_N=16)),
        ((1, 2, 64, 64), dict(BLOCK_M=32, BLOCK_N=32)),
        ((2, 1, 32, 128), dict(BLOCK_M=16, BLOCK_N=16)),
    ]
    run_cases(credit, [flash_case(sub, *_max_first(rng, shape, blocks["BLOCK_N"]), rng.seed,
                                  case="row max in the first key block", **blocks)
                       for shape, blocks in cases])


def _max_first(rng, shape, block_n, dtype="float16"):
    """q, k, v whose every row's max score is in the first key block (+4 on its scores), by a
    margin of 1, and no score above 9: drawn again in the rare draw where a later key would
    still score higher (about one grade in a hundred), which made a kernel without the running
    max fail here as well, or where a score passed 11.1 and exp(s) overflowed float16 (one grade
    of three of a kernel without the max subtracted, found by tools/mutant_repeat.py)."""
    for _ in range(100):
        q, k, v = qkv(rng, shape, dtype)
        c = float(np.sqrt(4.0 * np.sqrt(shape[-1])))
        q[..., 0] = round_to(np.full(q.shape[:-1], c), dtype)
        k[..., 0] = 0.0
        k[..., :block_n, 0] = q[..., 0][..., :block_n]
        s = np.asarray(q, np.float64) @ np.swapaxes(np.asarray(k, np.float64), -1, -2)
        if ((s[..., :block_n].max(-1) > s[..., block_n:].max(-1) + np.sqrt(shape[-1])).all()
                and s.max() / np.sqrt(shape[-1]) < 9.0):
            break
    return q, k, v


@pytest.mark.check("flash_triton.float32_input")
def test_float32_input(student, rng, credit):
    sub = student()
    shape, blocks = (1, 2, 64, 32), dict(BLOCK_M=32, BLOCK_N=32)
    run_cases(credit, [flash_case(sub, *qkv(rng, shape, "float32"), rng.seed, dtype="float32",
                                 case="float32 input, float32 output", **blocks)])


@pytest.mark.check("flash_triton.ragged_n")
def test_ragged_n(student, rng, credit):
    sub = student()
    cases = [  # (B, H, N, D), blocks
        ((1, 1, 1000, 16), dict(BLOCK_M=64, BLOCK_N=64)),   # 15 full key blocks and 40 keys
        ((1, 2, 17, 32), dict(BLOCK_M=64, BLOCK_N=64)),     # N smaller than one block
        ((1, 1, 1, 16), dict(BLOCK_M=64, BLOCK_N=64)),      # a single query and key
        ((1, 2, 100, 16), dict(BLOCK_M=32, BLOCK_N=64)),    # BLOCK_M < BLOCK_N
        ((1, 1, 100, 32), dict(BLOCK_M=64, BLOCK_N=16)),    # BLOCK_M > BLOCK_N
    ]
    # every score shifted up by 16 (softmax does not change): a padded key loaded as zeros
    # scores 0 and weighs e^-16 here even without its -inf, which is padded_keys_masked's idea
    run_cases(credit, [flash_case(sub, *shifted_qkv(rng, shape), rng.seed, case="scores + 16",
                                  **blocks) for shape, blocks in cases])
