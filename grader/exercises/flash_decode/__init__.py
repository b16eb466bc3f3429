"""The flash_decode exercise: its registry rows (rows.py), its checks per layer (test_<layer>.py),
the references and inputs they share (reference.py), how they judge a call (judging.py), the
known mistakes and their hints (mistakes.py), its kernel hooks (kernel.py: provenance's moved
inputs, the compute-sanitizer target) and its `make bench` declaration (bench.py)."""
