"""Registry rows of io_model's hidden checks: grader.registry.hidden_checks() loads CHECKS and
marks each row hidden."""

from grader.schema import Check as _C

CHECKS = [
    _C("io_model.hidden_shapes", "cpu", 2,
       "long contexts (N up to 1M), 1- and 8-byte elements, each count called twice",
       "The public checks' counts on sizes and element widths they do not use; the message names "
       "the function and the case that differed.",
       follows=("io_model.naive_bytes", "io_model.naive_flops", "io_model.intensity_flat_in_n",
                "io_model.flash_worst_case", "io_model.flash_l2_case",
                "io_model.flash_sram_theorem", "io_model.sp_memory")),
]
