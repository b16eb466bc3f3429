"""The flash_decode exercise: its registry rows (rows.py), its checks per layer (test_<layer>.py),
the references and inputs they share (reference.py), how they judge a call (judging.py), and
its compute-sanitizer target (sanitizer.py)."""
