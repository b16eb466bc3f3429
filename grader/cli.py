"""Command line: python -m grader [--submission DIR] [--exercises NAMES] [--layers NAMES]
                               [--json FILE] [--markdown FILE] [--gradescope FILE] [--no-hidden]

Exit status 0 whenever a report was written, whatever the score; 2 with a one-line reason for
bad arguments or a missing folder.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader.registry import EXERCISES, LAYERS


def names(value: str, known, what: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in items if v not in known]
    if unknown or not items:
        raise argparse.ArgumentTypeError(
            f"unknown {what} {', '.join(unknown) or repr(value)}; choose from {', '.join(known)}")
    return items


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not argparse's usage block
        print(f"grader: {message} (see python -m grader --help)", file=sys.stderr)
        raise SystemExit(2)


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m grader", description="Grade a FlashAttention lab submission.")
    p.add_argument("--submission", default="exercises", metavar="DIR",
                   help="folder holding the five exercise files (default: exercises/)")
    p.add_argument("--exercises", type=lambda v: names(v, EXERCISES, "exercise"), metavar="NAMES",
                   help=f"comma-separated, from: {', '.join(EXERCISES)}")
    p.add_argument("--layers", type=lambda v: names(v, LAYERS, "layer"), metavar="NAMES",
                   help=f"comma-separated, from: {', '.join(LAYERS)} (default: all that can run here)")
    p.add_argument("--checks", type=lambda v: [c.strip() for c in v.split(",") if c.strip()],
                   metavar="IDS", help="only these check ids (e.g. flash_triton.ragged_n); for debugging")
    p.add_argument("--json", metavar="FILE", help="write the JSON report here")
    p.add_argument("--markdown", metavar="FILE", help="write the Markdown report here")
    p.add_argument("--gradescope", metavar="FILE", help="write Gradescope's results.json here")
    p.add_argument("--no-hidden", action="store_true", help="skip hidden_tests/ even if present")
    p.add_argument("--quiet", action="store_true", help="no terminal report")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "batch":
        from grader.batch import main as batch_main

        return batch_main(argv[1:])
    try:
        args = parser().parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    submission = Path(args.submission)
    if not submission.is_dir():
        print(f"grader: no such folder: {submission}", file=sys.stderr)
        return 2

    from grader import report
    from grader.run import grade

    result = grade(submission, args.exercises, args.layers, include_hidden=not args.no_hidden,
                   only_checks=args.checks)
    report.write(result, args.json, args.markdown, args.gradescope)
    if not args.quiet:
        report.print_terminal(result)
    return 0

