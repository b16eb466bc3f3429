from tests.mutants import Mutant

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
           checks=("online_softmax.no_overflow",), idea="subtract the row max"),
]
