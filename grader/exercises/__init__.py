"""One folder per exercise, each module in one of the fixed roles of docs/ARCHITECTURE.md's table
(tests/test_layout.py holds the folders to it): rows.py (its registry rows), test_<layer>.py (its
checks, run by the grader's pytest), and public modules that hidden checks, shared code and the
bench may import (reference.py, judging.py, mistakes.py, kernel.py, bench.py). grader.registry
discovers the folders; shared code names none of them."""
