"""Registry rows of bench_attn's hidden checks: grader.registry.hidden_checks() loads CHECKS and
marks each row hidden."""

from grader.schema import Check as _C

CHECKS = [
    _C("bench_attn.hidden_timer_arguments", "adversarial", 2,
       "time_proper with its defaults, with rep = 1 and with an even rep",
       "Use the warmup and rep you are given (defaults 5 and 20), sync only through `sync` "
       "(default: torch.cuda.synchronize when CUDA is there, else nothing), median of the rep "
       "timed calls.",
       follows=("bench_attn.honest_timing",)),
]
