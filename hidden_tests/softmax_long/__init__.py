"""Hidden checks of softmax_long (instructor only): rows.py and test_*.py."""
