"""python -m grader: see grader/cli.py."""

import sys

from grader.cli import main

sys.exit(main())
