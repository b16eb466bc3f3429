from tests.mutants import Mutant

MUTANTS = [
    Mutant("merge_without_rescaling", "online_softmax",
           find="return m, la * math.exp(ma - m) + lb * math.exp(mb - m)",
           replace="return m, la + lb",
           checks=("online_softmax.merge_chunks",), idea="rescale"),
]
