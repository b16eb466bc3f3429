"""The io_model exercise (extension track): the lesson's counting of bytes, FLOPs and ceilings
as functions the student writes. Its registry rows (rows.py), its checks per layer (test_cpu.py,
test_adversarial.py), the grader's own formulas, lesson numbers and shapes (reference.py), the
known wrong counts and their hints (mistakes.py), and the judging of one answer (judging.py)."""
