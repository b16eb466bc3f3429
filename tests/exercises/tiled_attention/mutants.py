from tests.cases import Mutant

# `checks`: the check aimed at the mistake (it must lead the report); `idea`: a word that the
# failure's own message or hint contains
MUTANTS = [
    # Break It 2: rescale l by alpha but not acc; only visible when a row's max moves late
    Mutant("acc_not_rescaled", "tiled_attention",
           find="            acc *= alpha.astype(acc.dtype)[:, None]\n",
           replace="",
           checks=("tiled_attention.max_in_last_block",), idea="alpha"),
    Mutant("no_scale", "tiled_attention",
           find="            s *= scale",
           replace="            pass",
           checks=("tiled_attention.tiled_matches_float64",), idea="scale"),
    Mutant("no_final_division", "tiled_attention",
           find="O[i:i + Br] = acc / l.astype(acc.dtype)[:, None]",
           replace="O[i:i + Br] = acc",
           checks=("tiled_attention.tiled_matches_float64",), idea="acc / l"),
    # the last key block dropped when N is not a multiple of Bc (and every block when N < Bc)
    Mutant("partial_block_dropped", "tiled_attention",
           find="for j in range(0, N, Bc):",
           replace="for j in range(0, N - N % Bc, Bc):",
           checks=("tiled_attention.ragged_sizes",), idea="shorter"),
    # the right answer through the full N x N score matrix
    Mutant("full_score_matrix", "tiled_attention",
           find="    N, d = Q.shape\n",
           replace="    return naive_attention(Q, K, V)\n",
           checks=("tiled_attention.memory_is_tiled",), idea="N x N"),
    # exp(s) with no running max: m_new stays 0, so alpha = 1 and p = exp(s). Right on scores
    # near 0, inf / inf = nan once exp overflows
    Mutant("no_running_max", "tiled_attention",
           find="m_new = np.maximum(m, s.max(axis=1))",
           replace="m_new = np.zeros_like(m)",
           checks=("tiled_attention.large_scores",), idea="max"),
    # the running max starts at 0: right unless every score of a row is far below 0
    Mutant("running_max_starts_at_zero", "tiled_attention",
           find="m = np.full(q.shape[0], -np.inf)",
           replace="m = np.zeros(q.shape[0])",
           checks=("tiled_attention.negative_scores",), idea="-inf"),
    Mutant("naive_no_scale", "tiled_attention",
           find="    S *= 1.0 / np.sqrt(d)",
           replace="    pass",
           checks=("tiled_attention.naive_matches_float64",), idea="sqrt(d)"),
    Mutant("naive_no_max_subtraction", "tiled_attention",
           find="    S -= S.max(axis=1, keepdims=True)         # safe softmax: every exponent <= 0\n",
           replace="",
           checks=("tiled_attention.large_scores",), idea="max"),
]
