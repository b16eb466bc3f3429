"""One grading process of a parallel grade (grader.parallel), started as

    python -I -B grader/part.py

by the grade that splits its CPU layers across the cores. The repo root goes after
site-packages, as in grader/__main__.py, so nothing in the current folder shadows an import."""

import os
import sys

if __name__ == "__main__":
    _root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    _cwd = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ("", ".", _cwd, _root)] + [_root]

    from grader.parallel import serve

    serve()
