"""online_softmax's rows of the registry: the exercise, and its public checks with points, layers and
hints (grader.registry gathers every exercise folder's rows)."""

from grader.schema import Check as _C, Exercise, OVERFLOW

EXERCISE = Exercise(
    "online_softmax", "Online softmax (NumPy)", frozenset({"numpy"}), "cpu",
    seconds={"cpu": 0.6, "adversarial": 0.3},   # its CPU layers in a grade on an H100 box (schedule.py)
    order=1)

CHECKS = [
    _C("online_softmax.safe_matches_float64", "cpu", 2, "softmax_safe matches a float64 softmax (float64 input)",
       "Safe softmax: three passes, m = max(x), l = sum(exp(x - m)), out = exp(x - m) / l."),
    _C("online_softmax.online_max_sum", "cpu", 4, "online_max_sum returns the (m, l) of x (float64 input)",
       "Online softmax: m_new = max(m, x); l = l * exp(m - m_new) + exp(x - m_new); start at "
       "m = -inf, l = 0. Is m updated every step, and l rescaled when it moves?"),
    _C("online_softmax.one_pass", "cpu", 0, "online_max_sum reads x once, in order",
       "Online softmax is one pass: one element at a time, a running max m and a running sum l "
       "rescaled by exp(m_old - m_new) when m moves. x.max() then exp(x - m).sum() is two passes.",
       follows=("online_softmax.online_max_sum",), advice=True),
    _C("online_softmax.online_matches_float64", "cpu", 2, "softmax_online matches a float64 softmax (float64 input)",
       "Online softmax: one pass for (m, l), then out = exp(x - m) / l.",
       follows=("online_softmax.online_max_sum",)),
    _C("online_softmax.merge_chunks", "cpu", 3, "seven uneven chunks' (m, l) merged in any order give the whole row's",
       "The merge rule: m = max(ma, mb); l = la * exp(ma - m) + lb * exp(mb - m). Both sums "
       "must be rescaled to the new max before adding.",
       follows=("online_softmax.merge_empty_identity",)),
    _C("online_softmax.merge_empty_identity", "cpu", 1, "merging with the empty state (-inf, 0) changes nothing",
       "The empty state (m = -inf, l = 0) is the identity of merge: exp(-inf) = 0 makes the "
       "empty sum vanish; watch for -inf - (-inf) = nan when both sides are empty."),
    _C("online_softmax.empty_input", "adversarial", 1, "online_max_sum of an empty x is the empty state (-inf, 0)",
       "Start from the empty state m = -inf, l = 0.0, not from x[0]: n = 0 returns it unchanged."),
    _C("online_softmax.no_overflow", "adversarial", 1, "[1000, 1001, 1002] gives no inf or nan",
       "Safe softmax: subtract the row max before exp, so no exponent is positive and "
       "nothing overflows (exp(1000) is inf even in float64, and inf / inf is NaN).",
       follows=("online_softmax.online_max_sum",),
       evidence=OVERFLOW),
    _C("online_softmax.single_element", "adversarial", 1, "a single element has softmax 1 and state (x, 1)",
       "A single element: m = x[0], l = exp(0) = 1, softmax [1.0]. Does a loop or a slice skip it?",
       follows=("online_softmax.online_max_sum", "online_softmax.empty_input")),
    _C("online_softmax.low_precision_input", "adversarial", 1, "float16 and float32 input, scores past exp's overflow",
       "float16 exp overflows above 11.09 and float32 above 88.7: subtract the max, and "
       "accumulate in float32 or float64; any float output at least as precise as x is fine.",
       follows=("online_softmax.safe_matches_float64", "online_softmax.online_matches_float64",
                "online_softmax.online_max_sum", "online_softmax.no_overflow")),
]
