"""The tiled_attention exercise: its registry rows (rows.py) and its checks (test_*.py)."""
