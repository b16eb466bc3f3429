"""Registry rows of tiled_attention's hidden checks: grader.registry.hidden_checks() loads CHECKS and
marks each row hidden."""

from grader.schema import Check as _C

CHECKS = [
    _C("tiled_attention.hidden_shapes", "cpu", 3,
       "other N, d, Br and Bc (none a power of two), each shape twice with fresh values",
       "The block rule with any Br and Bc: slices past N are shorter, m, l and acc restart for "
       "every query block; the message names the case that differed.",
       follows=("tiled_attention.naive_matches_float64", "tiled_attention.tiled_matches_float64",
                "tiled_attention.ragged_sizes", "tiled_attention.max_in_last_block")),
    _C("tiled_attention.inputs_untouched", "adversarial", 1, "Q, K and V are unchanged after every call",
       "The inputs belong to the caller: work on copies or new arrays (scale the score tile, "
       "s *= scale, rather than Q in place). The message names the array that changed.",
       follows=("tiled_attention.naive_matches_float64", "tiled_attention.tiled_matches_float64",
                "tiled_attention.ragged_sizes", "tiled_attention.max_in_last_block")),
]
