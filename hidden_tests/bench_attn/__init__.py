"""Hidden checks of bench_attn (instructor only): rows.py and test_*.py."""
