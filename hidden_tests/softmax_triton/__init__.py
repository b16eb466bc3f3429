"""Hidden checks of softmax_triton (instructor only): rows.py and test_*.py."""
