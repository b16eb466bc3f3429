"""The attention_backward exercise: its registry rows (rows.py), its checks per layer
(test_cpu.py, test_adversarial.py), and what they share: float64 references and inputs
(reference.py), the calls and the judging of answers (judging.py), and the known mistakes and
their hints (mistakes.py)."""
