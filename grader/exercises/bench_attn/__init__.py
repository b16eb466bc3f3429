"""The bench_attn exercise: its registry rows (rows.py) and its checks (test_*.py)."""
