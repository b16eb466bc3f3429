"""What the two command lines (grader.cli, grader.batch) share: a parser that fails in one line,
comma-separated names checked against a known list, and CPU core lists."""

from __future__ import annotations

import argparse
import os
import sys


def names(value: str, known, what: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in items if v not in known]
    if unknown or not items:
        raise argparse.ArgumentTypeError(
            f"unknown {what} {', '.join(unknown) or repr(value)}; choose from {', '.join(known)}")
    return items


def cpu_list(value: str) -> list[int]:
    """--cpus: core numbers as `taskset -c` writes them ("0-3,8,10-11"), each one this process
    may run on (os.sched_getaffinity)."""
    cores = set()
    try:
        for part in (p.strip() for p in value.split(",") if p.strip()):
            first, _, last = part.partition("-")
            cores.update(range(int(first), int(last or first) + 1))
    except ValueError:
        cores = set()
    allowed = os.sched_getaffinity(0)
    if not cores or not cores <= allowed:
        raise argparse.ArgumentTypeError(
            f"--cpus wants cores this process may use ({cpu_text(sorted(allowed))}), got {value!r}")
    return sorted(cores)


def cpu_text(cores: list[int]) -> str:
    """Core numbers as --cpus takes them: "0-3,8"."""
    runs: list[list[int]] = []
    for c in sorted(cores):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not argparse's usage block
        print(f"grader: {message} (see python -m grader --help)", file=sys.stderr)
        raise SystemExit(2)
