"""attention_backward's hint texts for the mistakes that judging.py recognises by their answers:
each is shown only when the student's output equals that mistake's."""

# the backward: the answer of each known mistake (reference.backward_reference's `mistake`)
MISTAKES = {
    "no_D": "dQ and dK equal the gradients without the D term: the D trick, D = rowsum(dO o O), "
            "one number per row, and dS = P o (dP - D), not P o dP.",
    "D_from_dO": "dQ and dK equal the gradients with D = rowsum(dO o dO): the D trick is "
                 "D = rowsum(dO o O), the output O, not dO, times the incoming gradient "
                 "(sum_j P_ij dP_ij = dO_i . O_i).",
    "running_max": "The gradients equal those of P = e^(S - m) with m a running max over the key "
                   "blocks: recompute instead of remember rebuilds the exact probabilities from "
                   "L, P = e^(S - L); no running max is needed, L already is the normalizer.",
    "dK_unscaled": "dK is sqrt(d) times too large: the scale is missing in dK; "
                   "dK += dS^T Q * scale, with scale = 1/sqrt(d).",
    "dQ_unscaled": "dQ is sqrt(d) times too large: the scale is missing in dQ; "
                   "dQ += dS K * scale, with scale = 1/sqrt(d).",
    "dK_scaled_twice": "dK is sqrt(d) times too small: the scale is applied twice in dK; "
                       "S = Q K^T * scale carries it once, dK += dS^T Q * scale.",
    "dQ_scaled_twice": "dQ is sqrt(d) times too small: the scale is applied twice in dQ; "
                       "S = Q K^T * scale carries it once, dQ += dS K * scale.",
    "last_block_skipped": "The gradients equal those with the short last key block (keys {lo}.."
                          "{hi}, fewer than Bc = {Bc}) left out: loop over range(0, N, Bc) and "
                          "slice K[j:j + Bc]; the last slice is simply shorter.",
    "mask_strict": "The gradients equal those of a backward that hides the diagonal too (key j "
                   "visible only when j < i): query i sees keys j <= i, in the backward as in "
                   "the forward.",
    "mask_missing": "The gradients equal those of attention without the causal mask: the "
                    "backward walks the forward's tiles, skips blocks above the diagonal and "
                    "masks j > i in the blocks that cross it, so P is 0 there.",
    "diagonal_unmasked": "The gradients equal those of a backward that skips the blocks above "
                         "the diagonal but does not mask the ones that cross it: mask s where "
                         "j > i in every key block that reaches past the query block's first "
                         "row (j + Bc - 1 > i), so P is 0 there.",
}
# dQ alone off by about float16's rounding: the evidence of a float16 accumulator
DQ_LOW_PRECISION_HINT = ("Only dQ is off, and by {rel:.1e} of its largest entry: about float16's "
                         "rounding (2^-11 = 4.9e-4), while dK and dV are right. Is dQ accumulated "
                         "in float16 (np.zeros(..., np.float16), or Q's dtype)? Accumulate dQ in "
                         "float32 or better, as dK and dV are.")

# the forward's L
LSE_NO_M_HINT = ("L equals log(l) without the max: L = m + log(l), the log of the whole row's "
                 "softmax denominator, so that P = e^(S - L) comes out right in the backward pass.")
LSE_LOG2_HINT = ("L equals m + log2(l): use the natural log, L = m + log(l) (np.log), the base "
                 "that e^(S - L) undoes.")
