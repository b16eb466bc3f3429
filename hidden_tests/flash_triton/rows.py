"""Registry rows of flash_triton's hidden checks: grader.registry.hidden_checks() loads CHECKS and
marks each row hidden."""

from grader.schema import Check as _C

CHECKS = [
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
