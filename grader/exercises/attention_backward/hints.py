"""attention_backward's hint texts for the mistakes that judging.py recognises by their answers:
each is shown only when the student's output equals that mistake's."""

# the backward: the answer of each known mistake (reference.backward_reference's `mistake`)
MISTAKES = {
    "no_D": "dQ and dK equal the gradients without the D term: the D trick, D = rowsum(dO o O), "
            "one number per row, and dS = P o (dP - D), not P o dP.",
    "running_max": "The gradients equal those of P = e^(S - m) with m a running max over the key "
                   "blocks: recompute instead of remember rebuilds the exact probabilities from "
                   "L, P = e^(S - L); no running max is needed, L already is the normalizer.",
    "dK_unscaled": "dK is sqrt(d) times too large: the scale is missing in dK; "
                   "dK += dS^T Q * scale, with scale = 1/sqrt(d).",
    "dQ_unscaled": "dQ is sqrt(d) times too large: the scale is missing in dQ; "
                   "dQ += dS K * scale, with scale = 1/sqrt(d).",
}

# the forward's L
LSE_NO_M_HINT = ("L equals log(l) without the max: L = m + log(l), the log of the whole row's "
                 "softmax denominator, so that P = e^(S - L) comes out right in the backward pass.")
LSE_LOG2_HINT = ("L equals m + log2(l): use the natural log, L = m + log(l) (np.log), the base "
                 "that e^(S - L) undoes.")
