"""attention_backward's rows of the registry: the exercise, and its public checks with points, layers and
hints (grader.registry gathers every exercise folder's rows)."""

from grader.schema import Check as _C, Exercise, OVERFLOW

EXERCISE = Exercise(
    "attention_backward", "Causal attention, the logsumexp and the backward pass (NumPy)",
    frozenset({"numpy"}), "cpu", track="extension",
    seconds={"cpu": 3, "adversarial": 0.4},   # its CPU layers in a grade on an H100 box (schedule.py)
    order=7)

CHECKS = [
    _C("attention_backward.forward_matches_float64", "cpu", 4,
       "tiled_attention_lse: O and L match float64 on ragged sizes, Br != Bc",
       "The forward pass's step 4: after the last key block, O = acc / l and L = m + log(l) "
       "for each row, one number per query row, for the backward pass.",
       follows=("attention_backward.lse_includes_m",)),
    _C("attention_backward.lse_includes_m", "adversarial", 3,
       "L = m + log(l) in the natural log, on scores near 512",
       "L = m + log(l): the log of the whole row's softmax denominator, with the running max m "
       "added back and the natural log, so that the backward's e^(S - L) is the exact P."),
    _C("attention_backward.causal_mask", "cpu", 6,
       "causal=True: j <= i, the diagonal block with Br != Bc, short last blocks; O and L",
       "Causal: query i sees keys j <= i. Skip blocks above the diagonal (every key after every "
       "query of the block) and mask s where j > i in every block that crosses the diagonal.",
       follows=("attention_backward.lse_includes_m", "attention_backward.forward_matches_float64")),
    _C("attention_backward.causal_skips_blocks", "cpu", 0,
       "causal=True: key blocks above the diagonal are skipped, not computed (rows of K read)",
       "FlashAttention-2 skips blocks that are fully masked out: a key block that starts after "
       "the query block's last row is never read or computed; stop the key loop there.",
       follows=("attention_backward.causal_mask",), advice=True),
    _C("attention_backward.max_in_last_block", "adversarial", 2,
       "O and L when the row max sits in the last key block",
       "Break It 2 with L: rescale acc and l by alpha when the max moves; L = m + log(l) uses "
       "the final m and l.",
       follows=("attention_backward.lse_includes_m", "attention_backward.forward_matches_float64")),
    _C("attention_backward.backward_matches_float64", "cpu", 6,
       "tiled_backward: dQ, dK, dV match float64 analytic gradients (ragged, Br != Bc)",
       "Recompute instead of remember: per tile S = Q K^T * scale, P = e^(S - L); dV += P^T dO, "
       "dP = dO V^T, the D trick D = rowsum(dO o O), dS = P o (dP - D), dQ += dS K * scale, "
       "dK += dS^T Q * scale."),
    _C("attention_backward.backward_causal", "cpu", 3,
       "tiled_backward with causal=True: the same mask and skipped blocks as the forward",
       "The backward walks the same tiles as the forward: skip blocks above the diagonal and "
       "mask j > i in the blocks that cross it, so P is 0 there.",
       follows=("attention_backward.backward_matches_float64", "attention_backward.causal_mask")),
    _C("attention_backward.backward_finite_difference", "cpu", 2,
       "an entry in every row of each gradient matches central differences of sum(O * dO)",
       "The gradients are those of attention itself: dV = P^T dO, and dQ, dK through "
       "dS = P o (dP - D) with the scale 1/sqrt(d).",
       follows=("attention_backward.backward_matches_float64", "attention_backward.backward_causal")),
    _C("attention_backward.backward_recomputes_from_L", "adversarial", 2,
       "P is rebuilt from the L given (L shifted per row), not from a running max",
       "Recompute instead of remember: P = e^(S - L) with the L you are given; no running max, "
       "no second pass over the row.",
       follows=("attention_backward.backward_matches_float64",)),
    _C("attention_backward.backward_large_scores", "adversarial", 1,
       "backward on scores near 800 (exp overflows even in float64)",
       "P = e^(S - L) keeps every exponent <= 0; never exp(S) alone.",
       follows=("attention_backward.backward_matches_float64",
                "attention_backward.backward_recomputes_from_L", "attention_backward.causal_mask",
                "attention_backward.backward_causal"),
       evidence=OVERFLOW),
    _C("attention_backward.memory_is_linear", "cpu", 3,
       "forward and backward hold nothing N x N (the worker's peak memory, counted outside it)",
       "Recompute instead of remember: S and P exist one (Br, Bc) tile at a time in both passes; "
       "the only N-sized arrays are the outputs, L and D.",
       follows=("attention_backward.forward_matches_float64", "attention_backward.lse_includes_m",
                "attention_backward.causal_mask", "attention_backward.backward_matches_float64",
                "attention_backward.backward_causal")),
]
