"""Entry point, either way:

    python -I grader/__main__.py ARGS    what make, run_autograder and batch run
    python -m grader ARGS

Nothing in the current folder or a submission may shadow the grader's imports: started as a
file under -I, Python puts neither the current folder nor this file's folder on sys.path, and
here the repo root is appended after site-packages; under -m, the current folder that Python
put first moves to the end the same way. So a planted rich.py or numpy.py is never imported.
"""

import os
import sys

if __name__ == "__main__":   # not when multiprocessing's spawn re-runs this file as __mp_main__
    _root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    _cwd = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ("", ".", _cwd, _root)] + [_root]

    from grader.cli import main

    sys.exit(main())
