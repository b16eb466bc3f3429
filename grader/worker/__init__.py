"""What runs beside student code, in the worker process: the loop, the probes, the recorders.

Nothing here imports the trusted grader (grader.judge, grader.sandbox, grader.registry, the
checks): only grader.wire, the format both sides share. tests/test_layout.py holds that rule.
"""
