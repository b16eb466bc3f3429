"""Registry rows of flash_decode's hidden checks: grader.registry.hidden_checks() loads CHECKS and
marks each row hidden."""

from grader.schema import Check as _C

CHECKS = [
    _C("flash_decode.hidden_shapes", "interp", 3,
        "other B, Hq/Hkv, L_max, D, lengths and split counts, each twice, computed by the kernels",
        "Same trick, opposite axis: one program per (split, KV head, sequence) with masks on "
        "cols < seq_len, the merge rule in a second kernel, every output row written, and "
        "nothing remembered from an earlier call.",
        follows=("flash_decode.matches_reference", "flash_decode.ragged_lengths",
                 "flash_decode.gqa_heads", "flash_decode.empty_splits",
                 "flash_decode.padded_keys_masked", "flash_decode.max_in_last_split",
                 "flash_decode.large_scores", "flash_decode.uses_kernel")),
    _C("flash_decode.hidden_merge", "cpu", 1,
        "merge_partials of more, shuffled splits with empty ones, each shape twice",
        "The merge rule in any order, the empty state (-inf, 0, 0) as its identity, and o = acc "
        "/ l once at the end, computed from the parts you are given.",
        follows=("flash_decode.merge_matches_one_pass", "flash_decode.merge_empty_split")),
]
