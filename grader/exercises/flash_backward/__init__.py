"""The flash_backward exercise: its registry rows (rows.py), its checks per layer (test_interp.py,
test_adversarial.py, test_gpu.py, test_perf.py), and what they share: references and inputs
(reference.py), the calls and the judging of answers (judging.py), hint texts (hints.py), the perf
layer's one measurement (measure.py), and the compute-sanitizer target (sanitizer.py)."""
