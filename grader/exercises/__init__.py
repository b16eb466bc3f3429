"""One folder per exercise: rows.py (its registry rows), test_*.py (its checks, run by the
grader's pytest), and public modules that hidden checks, the sanitizer and the bench may import
(reference.py, sanitizer.py, bench.py). grader.registry discovers the folders; shared code
names none of them."""
