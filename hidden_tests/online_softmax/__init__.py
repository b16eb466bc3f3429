"""Hidden checks of online_softmax (instructor only): rows.py and test_*.py."""
