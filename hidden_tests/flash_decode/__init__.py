"""Hidden checks of flash_decode (instructor only): rows.py and test_*.py."""
