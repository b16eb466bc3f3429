"""Registry rows of flash_backward's hidden checks: grader.registry.hidden_checks() loads CHECKS and
marks each row hidden."""

from grader.schema import Check as _C

CHECKS = [
    _C("flash_backward.hidden_shapes", "interp", 3,
        "other N (1 included), blocks larger than N, fp16 and fp32, causal and not, each twice; "
        "inputs unchanged",
        "L = m + log(l) and skipping blocks above the diagonal in the forward; recompute instead "
        "of remember, P = e^(S - L), and the D trick in the backward; on every shape, masked, "
        "computed by your kernels, nothing remembered between calls, the inputs left as they came.",
        follows=("flash_backward.forward_matches_float64", "flash_backward.lse_includes_m",
                 "flash_backward.causal_mask", "flash_backward.backward_matches_float64",
                 "flash_backward.backward_causal", "flash_backward.masked_accesses",
                 "flash_backward.uses_kernel")),
]
