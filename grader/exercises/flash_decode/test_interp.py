"""flash_decode's interp checks: the Triton kernels under the interpreter on small caches, at full
lengths, at ragged lengths with NaN past them, and with grouped-query heads (lesson: the
Flash-Decoding paragraph, "Same trick, opposite axis").

Every input is rounded to the dtype the kernel sees, so the float64 reference (computed here,
from the valid keys only) sees exactly the same numbers. NaN lies past seq_lens[b] and behind
each cache where the masks are the point (ragged_lengths), zeros elsewhere. Checks other than
gqa_heads use Hq = Hkv or Hkv = 1, where a wrong query-to-KV-head mapping cannot show.

Every output is judged by flash-attention's rule (judging.assert_decode, compare.assert_close's
`baseline`): within BASELINE_MULT times the error of plain PyTorch in the input dtype on the same
inputs, plus a floor. A kernel that forms q . k element-wise, float16 products summed in float16
(public one-row decode kernels do, instead of tl.dot's float32 accumulator), is correct: PyTorch
in float16 rounds the scores to float16 too, and such a kernel lands at 1-2x its error under the
interpreter (NumPy sums float16 in float32) and, on a GPU, within the floor at the gpu layer's
long caches (float16 sums in a tree of adds: up to ~5x PyTorch's error, measured by emulation),
while every mistake of the lesson is off by 10-1000x (tests/exercises/flash_decode/variants/decode_fp16_elementwise_qk,
tests/test_steady_grades.py, tools/gpu_repeat.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.exercises.flash_decode.judging import assert_decode
from grader.exercises.flash_decode.reference import decode_inputs, decode_reference, fill_past


MASK_NAN_HINT = ("nan in the output, and the cache holds NaN past seq_lens[b] here: a K or V load "
                 "read past the sequence's end. Mask the loads on cols < seq_len (not L_max), and "
                 "let no split run past seq_len.")


@pytest.mark.check("flash_decode.matches_reference")
def test_matches_reference(student, rng):
    sub = student()
    cases = [  # B, Hq, Hkv, L_max, D, dtype, num_splits; every sequence uses its whole cache
        (2, 2, 2, 96, 64, "float16", 3),
        (1, 4, 1, 64, 128, "float16", None),     # one KV head for all query heads (MQA)
        (3, 1, 1, 70, 64, "float16", 2),
        (2, 2, 2, 50, 64, "float32", 2),
    ]
    for B, Hq, Hkv, L, D, dtype, splits in cases:
        q, k, v = decode_inputs(rng, B, Hq, Hkv, L, D, dtype)
        assert_decode(sub, q, k, v, [L] * B, dtype=dtype, num_splits=splits, seed=rng.seed)


@pytest.mark.check("flash_decode.ragged_lengths")
def test_ragged_lengths(student, rng):
    sub = student()
    # NaN in every cache position past seq_lens[b] and behind the caches: a K or V load that is
    # not masked on cols < seq_len, or a split that runs past it, turns into nan
    cases = [  # B, Hq, Hkv, L_max, D, seq_lens, num_splits
        (4, 2, 2, 150, 64, None, 3),
        (3, 2, 2, 100, 128, [1, 100, 51], None),
        (2, 3, 1, 97, 64, [17, 97], 4),
    ]
    # The last sequence ends at L_max (150, 97: no multiple of any block) in two cases, so a K or
    # V load without its mask reads past the end of the cache there, and the bounds hooks record
    # it deterministically (inside the cache, past seq_lens[b], the NaN shows it)
    for B, Hq, Hkv, L, D, lens, splits in cases:
        if lens is None:   # 1, two lengths that are no multiple of 16, and L_max last
            lens = [1, *(int(rng.integers(2, L // 16)) * 16 + int(rng.integers(1, 16))
                         for _ in range(B - 2)), L]
        q, k, v = decode_inputs(rng, B, Hq, Hkv, L, D)
        k, v = fill_past(k, v, lens, np.nan, np.nan)
        assert_decode(sub, q, k, v, lens, num_splits=splits, guard_poison=np.nan, seed=rng.seed,
                      case="NaN past seq_lens[b] and behind the caches", nan_hint=MASK_NAN_HINT,
                      bounds=True)


@pytest.mark.check("flash_decode.gqa_heads")
def test_gqa_heads(student, rng):
    sub = student()
    cases = [(2, 8, 2, 40, 64), (1, 6, 3, 33, 64), (1, 12, 4, 20, 128)]   # groups of 4, 2, 3
    for B, Hq, Hkv, L, D in cases:
        q, k, v = decode_inputs(rng, B, Hq, Hkv, L, D)
        lens = [L] * B
        hint = (f"Your output is what query head h gets from KV head h % Hkv. The heads of one "
                f"group are consecutive: head h reads KV head h // (Hq // Hkv), here h // "
                f"{Hq // Hkv}.")
        assert_decode(sub, q, k, v, lens, num_splits=2, seed=rng.seed,
                      case=f"groups of {Hq // Hkv} query heads per KV head",
                      twins=[(decode_reference(q, k, v, lens, interleaved=True), hint)])
