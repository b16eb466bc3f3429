"""Registry rows of online_softmax's hidden checks: grader.registry.hidden_checks() loads CHECKS and
marks each row hidden."""

from grader.schema import Check as _C

CHECKS = [
    _C("online_softmax.hidden_shapes", "cpu", 2,
       "other lengths, scales and dtypes, each shape twice with fresh values",
       "The public checks' ideas on lengths, scales and dtypes they do not use; the message "
       "names the case that differed (length, dtype, scale, which call).",
       follows=("online_softmax.safe_matches_float64", "online_softmax.online_max_sum",
                "online_softmax.online_matches_float64", "online_softmax.low_precision_input",
                "online_softmax.single_element", "online_softmax.no_overflow")),
    _C("online_softmax.inputs_untouched", "adversarial", 1, "x is unchanged after every call",
       "The inputs belong to the caller: work on copies or new arrays (x -= x.max() changes the "
       "caller's array). The message says which function changed x, where, and how.",
       follows=("online_softmax.safe_matches_float64", "online_softmax.online_max_sum",
                "online_softmax.online_matches_float64")),
]
