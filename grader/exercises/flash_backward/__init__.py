"""The flash_backward exercise: its registry rows (rows.py), its checks per layer (test_interp.py,
test_adversarial.py, test_gpu.py, test_perf.py, which also makes the perf layer's one
measurement), and what they share: references and inputs (reference.py), the calls and the
judging of answers (judging.py), the known mistakes and their hints (mistakes.py), its kernel
hooks (kernel.py: provenance's moved inputs, the compute-sanitizer target) and its `make bench`
declaration (bench.py)."""
