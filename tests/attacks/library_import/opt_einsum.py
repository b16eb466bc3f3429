"""Imported by torch itself, if it could be found: it says so where the report would show it."""
print("LAB-ATTACK-MARKER: opt_einsum.py from the submission folder ran")
raise ImportError("opt_einsum from the submission folder")
