"""The flash_backward exercise: its registry rows (rows.py) and its checks (test_*.py)."""
