"""The online_softmax exercise: its registry rows (rows.py) and its checks (test_*.py)."""
