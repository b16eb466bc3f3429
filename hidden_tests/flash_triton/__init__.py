"""Hidden checks of flash_triton (instructor only): rows.py and test_*.py."""
