"""Registry rows of softmax_long's hidden checks: grader.registry.hidden_checks() loads CHECKS and
marks each row hidden."""

from grader.schema import Check as _C

_ANSWERS = ("softmax_long.uses_kernel", "softmax_long.masked_accesses",
            "softmax_long.max_in_last_block", "softmax_long.neg_inf_blocks",
            "softmax_long.fp16_large_values", "softmax_long.all_negative_rows",
            "softmax_long.matches_float64", "softmax_long.short_rows", "softmax_long.float32_rows")

CHECKS = [
    _C("softmax_long.hidden_shapes", "interp", 2,
       "other shapes and blocks, each twice with fresh values, computed by the kernels",
       "Long rows by the online softmax over blocks of BLOCK columns, short rows several per "
       "program; masked loads (other=-inf) and stores; the wrapper only allocates and launches.",
       follows=_ANSWERS),
    _C("softmax_long.output_written", "adversarial", 1,
       "every output element is written by the kernels and the input is left alone",
       "The grid must cover every row and the stores every column block, the short last one "
       "included; write only to the output, never to x.", follows=_ANSWERS),
]
