"""tiled_attention's rows of the registry: the exercise, and its public checks with points, layers and
hints (grader.registry gathers every exercise folder's rows)."""

from grader.schema import Check as _C, Exercise

EXERCISE = Exercise(
    "tiled_attention", "Tiled attention (NumPy)", frozenset({"numpy"}), "cpu",
    seconds={"cpu": 4, "adversarial": 1},   # its CPU layers in a grade on an H100 box (schedule.py)
    order=2)

CHECKS = [
    _C("tiled_attention.naive_matches_float64", "cpu", 2, "naive_attention matches a float64 reference",
       "Attention: S = Q K^T / sqrt(d), P = safe softmax of each row of S, O = P V."),
    _C("tiled_attention.tiled_matches_float64", "cpu", 3, "tiled_attention matches a float64 reference (N a multiple of Br and Bc)",
       "The block rule: per query block keep m, l, acc; for each key block s = q k^T * scale, "
       "m_new = max(m, rowmax(s)), p = exp(s - m_new), alpha = exp(m - m_new), l = l*alpha + "
       "rowsum(p), acc = acc*alpha + p v; at the end O = acc / l."),
    _C("tiled_attention.ragged_sizes", "cpu", 3, "tiled_attention on ragged sizes: N = 1, N < Br, N a multiple of neither block, Br != Bc",
       "Slices past N are shorter: the last query block has N - i rows and the last key block "
       "N - j keys. Slice with Q[i:i + Br], never assume a full block.",
       follows=("tiled_attention.tiled_matches_float64",)),
    _C("tiled_attention.memory_is_tiled", "cpu", 3, "the worker's peak memory, counted outside it, holds nothing N x N",
       "Tiling: never build anything bigger than a Br x Bc score tile (no N x N scores, no "
       "row of N scores); S and P exist only a tile at a time (that is the whole point of "
       "FlashAttention), and the only N-sized array is the output.",
       follows=("tiled_attention.tiled_matches_float64", "tiled_attention.ragged_sizes")),
    _C("tiled_attention.key_tiles", "cpu", 0, "K and V are read one block of at most Bc rows at a time",
       "Tiling: the inner loop takes one key/value block at a time, k = K[j:j+Bc] and "
       "v = V[j:j+Bc], and builds the (Br, Bc) score tile q @ k.T; a whole row of scores "
       "(K @ q against every key) is not a tile.",
       follows=("tiled_attention.tiled_matches_float64", "tiled_attention.ragged_sizes"),
       advice=True),
    _C("tiled_attention.max_in_last_block", "adversarial", 2, "correct when the row max sits in the last key block",
       "Break It 2: right until the row max moves into a later key block. Is acc rescaled by "
       "alpha, as l is?",
       follows=("tiled_attention.tiled_matches_float64", "tiled_attention.ragged_sizes")),
    _C("tiled_attention.one_pass_over_keys", "adversarial", 0, "one pass over the key blocks per query block, each read with its value block",
       "The online rescale: one pass over the key blocks. Keep a running max m; when a block "
       "raises it, rescale l and acc by alpha = exp(m - m_new) before adding the block's p and "
       "p @ v. No separate pass to find the max first.",
       follows=("tiled_attention.tiled_matches_float64", "tiled_attention.ragged_sizes",
                "tiled_attention.max_in_last_block"),
       advice=True),
    _C("tiled_attention.large_scores", "adversarial", 2, "scores large enough to overflow exp without the max subtracted (naive and tiled)",
       "The running max is what keeps exp from overflowing: p = exp(s - m_new), never exp(s); "
       "naive_attention subtracts each row's max.",
       follows=("tiled_attention.naive_matches_float64", "tiled_attention.tiled_matches_float64",
                "tiled_attention.ragged_sizes", "tiled_attention.max_in_last_block")),
    _C("tiled_attention.negative_scores", "adversarial", 1, "rows whose scores are all far below 0 (naive and tiled)",
       "The running max starts at -inf, not 0, and the softmax subtracts each row's own max: "
       "with every score far below 0, exp(s) underflows to 0 and l = 0.",
       follows=("tiled_attention.naive_matches_float64", "tiled_attention.tiled_matches_float64",
                "tiled_attention.ragged_sizes", "tiled_attention.max_in_last_block",
                "tiled_attention.large_scores")),
]
