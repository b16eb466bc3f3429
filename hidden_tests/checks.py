"""Registry rows of the instructor-only checks: grader.registry.hidden_checks() loads CHECKS
and marks each row hidden (Gradescope shows them after publication). Same fields as the public
rows in grader/registry.py; ids start with the exercise's name. Not part of the student release.
"""

from grader.registry import Check as _C

CHECKS = [
    # ---------------------------------------------------------------- online_softmax (3)
    _C("online_softmax.hidden_shapes", "cpu", 2,
       "other lengths, scales and dtypes, each shape twice with fresh values",
       "Nothing may depend on the public checks' lengths or on earlier calls: compute every "
       "answer from the x you are given (safe softmax: subtract the max, exp, sum, divide)."),
    _C("online_softmax.inputs_untouched", "adversarial", 1, "x is unchanged after every call",
       "Work on copies or new arrays: x -= x.max() changes the caller's array. The inputs "
       "belong to the caller."),
    # ---------------------------------------------------------------- tiled_attention (4)
    _C("tiled_attention.hidden_shapes", "cpu", 3,
       "other N, d, Br and Bc (none a power of two), each shape twice with fresh values",
       "The block rule with any Br and Bc: slices past N are shorter, m, l and acc restart for "
       "every query block, and nothing may be remembered from an earlier call."),
    _C("tiled_attention.inputs_untouched", "adversarial", 1, "Q, K and V are unchanged after every call",
       "Scale the scores tile (s *= scale), not Q in place: Q *= scale changes the caller's "
       "array. The inputs belong to the caller."),
    # ---------------------------------------------------------------- softmax_triton (3)
    _C("softmax_triton.hidden_shapes", "interp", 2,
       "other shapes, each twice with fresh values, computed by the kernel",
       "One program per row, BLOCK = next power of two >= n_cols, masked load (other=-inf) and "
       "store; the wrapper only allocates and launches.",
       follows=("softmax_triton.uses_kernel", "softmax_triton.masked_accesses",
                "softmax_triton.all_negative_rows", "softmax_triton.matches_float64",
                "softmax_triton.float32_input", "softmax_triton.fp16_scaled_rows")),
    _C("softmax_triton.output_written", "adversarial", 1,
       "every output element is written by the kernel and the input is left alone",
       "The grid must cover every row (grid = (n_rows,)) and the store every column "
       "(mask = cols < n_cols); write only to the output, never to x.",
       follows=("softmax_triton.uses_kernel", "softmax_triton.masked_accesses",
                "softmax_triton.all_negative_rows", "softmax_triton.matches_float64",
                "softmax_triton.float32_input")),
    # ---------------------------------------------------------------- flash_triton (5)
    _C("flash_triton.hidden_shapes", "interp", 3,
       "other B, H, N, D and blocks, each shape twice with fresh values, computed by the kernel",
       "grid = (cdiv(N, BLOCK_M), B * H); mask loads on cols < N and rows < N, -inf for "
       "padded scores, rescale acc by alpha, divide by l_i at the end.",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands",
                "flash_triton.matches_reference", "flash_triton.max_in_last_block",
                "flash_triton.large_scores")),
    _C("flash_triton.output_written", "adversarial", 2,
       "every output element is written by the kernel; q, k, v and the memory behind them are left alone",
       "Every program stores its whole (BLOCK_M, D) tile, masked on rows < N only, into O; "
       "nothing is stored into Q, K or V.",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands",
                "flash_triton.padded_keys_masked", "flash_triton.matches_reference",
                "flash_triton.max_in_last_block", "flash_triton.large_scores",
                "flash_triton.ragged_n")),
]
del _C
