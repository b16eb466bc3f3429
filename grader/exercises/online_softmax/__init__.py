"""The online_softmax exercise: its registry rows (rows.py), its checks per layer (test_cpu.py,
test_adversarial.py) and the (m, l) judgement they and the hidden checks share (judging.py)."""
