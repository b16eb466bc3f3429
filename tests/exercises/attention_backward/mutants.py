from tests.cases import Mutant

# The mistakes issue 12 lists for the NumPy backward exercise. `checks`: the check aimed at the
# mistake (it must lead the report); `idea`: words that the failure's own message or hint contains
_DIAG = "            if causal and j + k.shape[0] - 1 > i:"
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
]
