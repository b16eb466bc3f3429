"""The tiled_attention exercise: its registry rows (rows.py), its checks per layer (test_cpu.py,
test_adversarial.py), and what they and the hidden checks share: the inputs (reference.py), the
memory gate and the compared calls (judging.py), the attention mistakes a failure can name
(mistakes.py, flash_triton's too) and its `make bench` declaration (bench.py)."""
