"""Registry rows of softmax_triton's hidden checks: grader.registry.hidden_checks() loads CHECKS and
marks each row hidden."""

from grader.schema import Check as _C

CHECKS = [
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
]
