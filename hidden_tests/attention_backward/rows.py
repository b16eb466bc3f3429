"""Registry rows of attention_backward's hidden checks: grader.registry.hidden_checks() loads CHECKS and
marks each row hidden."""

from grader.schema import Check as _C

_AB = ("attention_backward.forward_matches_float64", "attention_backward.lse_includes_m",
       "attention_backward.causal_mask", "attention_backward.max_in_last_block",
       "attention_backward.backward_matches_float64", "attention_backward.backward_causal",
       "attention_backward.backward_recomputes_from_L")

CHECKS = [
    _C("attention_backward.hidden_shapes", "cpu", 2,
        "other N, d, Br, Bc (Br = 1, blocks larger than N), causal and not, each twice",
        "The forward's block rule with L = m + log(l) and causal skipping, and the backward's "
        "P = e^(S - L) with the D trick, on every shape; nothing remembered between calls.",
        follows=_AB),
    _C("attention_backward.inputs_untouched", "adversarial", 1,
        "Q, K, V, O, L and dO are unchanged after the calls",
        "The inputs belong to the caller: work on new arrays (O -= ... or L += ... changes the "
        "caller's). The message says which input changed, where, and how.",
        follows=_AB),
]
