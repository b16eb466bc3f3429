"""Hidden checks of flash_backward (instructor only): rows.py and test_*.py."""
