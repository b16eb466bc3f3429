"""The flash_triton exercise: its registry rows (rows.py), its checks per layer (test_<layer>.py),
the inputs and references they share (reference.py), how the interpreter checks call and judge
flash_fwd (judging.py), and its compute-sanitizer target (sanitizer.py)."""
