"""The flash_triton exercise: its registry rows (rows.py) and its checks (test_*.py)."""
