"""The softmax_triton exercise: its registry rows (rows.py), its checks per layer
(test_adversarial.py, test_interp.py, test_gpu.py, test_perf.py), the calls and comparisons they
and the hidden checks share (judging.py), and compute-sanitizer's TARGET (sanitizer.py)."""
