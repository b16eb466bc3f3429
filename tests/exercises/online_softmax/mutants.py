from tests.cases import Mutant

# `checks`: the check aimed at the mistake (it must lead the report); `idea`: a word that the
# failure's own message or hint contains; `advice`: an advice check aimed at it (no points: the
# two-pass (m, l) is right, and only a read log, built in the worker, sees the second pass)
MUTANTS = [
    Mutant("merge_without_rescaling", "online_softmax",
           find="return m, l_a * math.exp(m_a - m) + l_b * math.exp(m_b - m)",
           replace="return m, l_a + l_b",
           checks=("online_softmax.merge_chunks",), idea="rescaled"),
    Mutant("running_max_never_updated", "online_softmax",
           find="        m = m_new\n    return m, l",
           replace="    return m, l",
           checks=("online_softmax.online_max_sum",), idea="m updated"),
    Mutant("no_max_subtraction", "online_softmax",
           find="e = np.exp(xw - m)",
           replace="e = np.exp(xw)",
           checks=("online_softmax.no_overflow",), idea="NaN"),
    Mutant("two_passes", "online_softmax",
           find="    for xi in np.asarray(x, dtype=np.float64).tolist():    # Python floats, one at a time",
           replace="    if len(x):\n        m = float(x.max())\n        return m, float(np.exp(x - m).sum())\n"
                   "    for xi in np.asarray(x, dtype=np.float64).tolist():",
           checks=(), advice=("online_softmax.one_pass",), idea="one pass"),
    Mutant("seeded_with_first_element", "online_softmax",
           find="    m, l = -math.inf, 0.0     # the empty state",
           replace="    m, l = float(x[0]), 0.0   # the empty state",
           checks=("online_softmax.empty_input",), idea="empty"),
]
