"""Hidden checks of io_model (instructor only): rows.py and test_*.py."""
