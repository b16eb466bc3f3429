"""What the two command lines (grader.cli, grader.batch) share: a parser that fails in one line,
and comma-separated names checked against a known list."""

from __future__ import annotations

import argparse
import sys


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
