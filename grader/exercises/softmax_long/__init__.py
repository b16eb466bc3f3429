"""The softmax_long exercise (extension track): its registry rows (rows.py), its checks per layer
(test_adversarial.py, test_interp.py, test_gpu.py, test_perf.py), the calls, comparisons and
diagnosis they and the hidden checks share (judging.py), compute-sanitizer's TARGET
(sanitizer.py) and its `make bench` declaration (bench.py)."""
