"""The softmax_long exercise (extension track): its registry rows (rows.py), its checks per layer
(test_adversarial.py, test_interp.py, test_gpu.py, test_perf.py), the calls and comparisons
they and the hidden checks share (judging.py), the known mistakes and their hints (mistakes.py),
its kernel hooks (kernel.py: provenance's moved inputs, compute-sanitizer's TARGET) and its
`make bench` declaration (bench.py)."""
