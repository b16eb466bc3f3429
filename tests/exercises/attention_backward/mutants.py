from tests.cases import Mutant

# The mistakes issue 12 lists for the NumPy backward exercise. `checks`: the check aimed at the
# mistake (it must lead the report); `idea`: words that the failure's own message or hint contains
_DIAG = "            if causal and j + k.shape[0] - 1 > i:"
_BWD_MASK = ("            if causal and j + k.shape[0] - 1 > i:\n                _causal_mask(s, i, j)\n"
             "            p = np.exp(s - L_i[:, None])")
MUTANTS = [
    # off by one: the diagonal masked too (row 0 then sees no key at all)
    Mutant("causal_strict", "attention_backward",
           find="s[cols > rows] = -np.inf", replace="s[cols >= rows] = -np.inf",
           checks=("attention_backward.causal_mask",), idea="j <= i"),
    # the diagonal block taken to be the one with j == i: right only when Br == Bc
    Mutant("diagonal_block_unmasked", "attention_backward",
           find=f"{_DIAG}   # the block crosses the diagonal",
           replace="            if causal and j == i:",
           also=((f"{_DIAG}\n", "            if causal and j == i:\n"),),
           checks=("attention_backward.causal_mask",), idea="diagonal"),
    Mutant("lse_without_m", "attention_backward",
           find="L[i:i + Br] = m + np.log(l)", replace="L[i:i + Br] = np.log(l)",
           checks=("attention_backward.lse_includes_m",), idea="m + log(l)"),
    Mutant("lse_log2", "attention_backward",
           find="L[i:i + Br] = m + np.log(l)", replace="L[i:i + Br] = m + np.log2(l)",
           checks=("attention_backward.lse_includes_m",), idea="natural log"),
    Mutant("no_d_term", "attention_backward",
           find="ds = p * (dp - D_i[:, None])", replace="ds = p * dp",
           checks=("attention_backward.backward_matches_float64",), idea="D = rowsum"),
    # the forward's habit in the backward: a running max over the key blocks instead of L
    Mutant("p_from_running_max", "attention_backward",
           find="            p = np.exp(s - L_i[:, None])",
           replace="            m = np.maximum(m, s.max(axis=1))\n"
                   "            p = np.exp(s - m[:, None])",
           also=(("        dq = np.zeros((br, d))\n",
                  "        dq = np.zeros((br, d))\n        m = np.full(br, -np.inf)\n"),),
           checks=("attention_backward.backward_matches_float64",), idea="running max"),
    Mutant("no_scale_dk", "attention_backward",
           find="dK[j:j + Bc] += ds.T @ q * scale", replace="dK[j:j + Bc] += ds.T @ q",
           checks=("attention_backward.backward_matches_float64",), idea="scale is missing in dK"),
    Mutant("no_scale_dq", "attention_backward",
           find="dq += ds @ k * scale", replace="dq += ds @ k",
           checks=("attention_backward.backward_matches_float64",), idea="scale is missing in dQ"),
    # the D trick with the wrong factor: dO o dO instead of dO o O
    Mutant("d_from_do", "attention_backward",
           find="D = np.sum(dO.astype(np.float64) * O, axis=1)",
           replace="D = np.sum(dO.astype(np.float64) * dO, axis=1)",
           checks=("attention_backward.backward_matches_float64",), idea="rowsum(dO o O)"),
    Mutant("dq_scaled_twice", "attention_backward",
           find="dq += ds @ k * scale", replace="dq += ds @ k * scale * scale",
           checks=("attention_backward.backward_matches_float64",), idea="applied twice in dQ"),
    # the backward's key loop stops at the last whole block: a short last block is skipped
    Mutant("bwd_last_block_skipped", "attention_backward",
           find="        for j in range(0, N, Bc):\n            if causal and j > i + br - 1:     # above",
           replace="        for j in range(0, N // Bc * Bc, Bc):\n            if causal and j > i + br - 1:     # above",
           checks=("attention_backward.backward_matches_float64",), idea="short last key block"),
    # dQ summed in float16: right to float16's rounding only
    Mutant("dq_float16", "attention_backward",
           find="dq = np.zeros((br, d))", replace="dq = np.zeros((br, d), np.float16)",
           checks=("attention_backward.backward_matches_float64",), idea="accumulated in float16"),
    # the backward alone hides the diagonal (j < i): the forward is right
    Mutant("bwd_causal_strict", "attention_backward",
           find=_BWD_MASK,
           replace=_BWD_MASK.replace("- 1 > i:", "- 1 >= i:").replace("(s, i, j)", "(s, i - 1, j)"),
           checks=("attention_backward.backward_causal",), idea="j <= i"),
    # the backward skips the blocks above the diagonal but masks nothing in those that cross it
    Mutant("bwd_diagonal_unmasked", "attention_backward",
           find=_BWD_MASK, replace="            p = np.exp(s - L_i[:, None])",
           checks=("attention_backward.backward_causal",), idea="does not mask"),
    # the running max started at 0: right until every score of a row is far below 0
    Mutant("m_starts_at_zero", "attention_backward",
           find="m = np.full(br, -np.inf)              # running row max",
           replace="m = np.zeros(br)                     # running row max",
           checks=("attention_backward.lse_includes_m",), idea="-inf"),
    # the causal skip one block late: a key block above the diagonal is still computed (and
    # masked: the answer is right, so only the read log, advice with no points, sees it)
    Mutant("skip_one_block_late", "attention_backward",
           find="            if causal and j > i + br - 1:     # the whole block is above the diagonal: skip it",
           replace="            if causal and j > i + br - 1 + Bc:",
           checks=(), advice=("attention_backward.causal_skips_blocks",), idea="not skipped"),
]
