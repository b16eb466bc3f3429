"""The flash_decode exercise: its registry rows (rows.py) and its checks (test_*.py)."""
