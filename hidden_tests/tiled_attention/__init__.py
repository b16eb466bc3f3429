"""Hidden checks of tiled_attention (instructor only): rows.py and test_*.py."""
