"""Command line: python -I grader/__main__.py [--submission DIR] [--exercises NAMES] [--layers NAMES]
        [--json FILE] [--markdown FILE] [--gradescope FILE] [--no-hidden] [--sandbox | --no-sandbox]
        [--completion-marker FILE] [--target NAME] [--jobs N] [--seed N] ...   (or python -m grader ...)

The flags after --no-hidden, and the environment variables an instructor may set instead
(grader.options.ENVIRONMENT), make one `grader.options.Options`: the grade runs with it.

Exit status 0 when the reports were written, whatever the score; 2 with a one-line reason for bad
arguments, a missing folder or a report path that cannot be written (checked before grading);
3 when writing a report failed after grading.

--completion-marker FILE: read a nonce from the first line of stdin before any student code runs,
and once every report is written, write FILE: the nonce, then the SHA-256 of each report
(`sha256sum` lines). run_autograder and batch accept a report only when the grader exited 0 and
this marker holds their nonce and the report's hash.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# everything the reports need is imported before any student code runs (no late import a
# submission could shadow or replace): rich, the report modules, json, hashlib
import rich.console  # noqa: F401
import rich.progress  # noqa: F401
import rich.table  # noqa: F401

from grader import options, report
from grader.options import Parser, cpu_list, names
from grader.registry import EXERCISES, LAYERS


def warm_up() -> None:
    """Render a throwaway report table once, so that rich's lazily imported parts (boxes,
    wrapping, cell widths) are loaded now, before any student code runs."""
    import io

    console = rich.console.Console(file=io.StringIO(), width=100, force_terminal=True)
    grid = rich.table.Table(title="warm-up")
    grid.add_column("x")
    grid.add_row(report.terminal.Text("[/x] é 表"))
    console.print(grid)
    console.print(report.terminal.Text("x"), soft_wrap=True)


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
    p.add_argument("--completion-marker", metavar="FILE",
                   help="read a nonce from stdin; write it with the reports' SHA-256 to FILE last")
    p.add_argument("--quiet", action="store_true", help="no terminal report, no progress")
    p.add_argument("--no-page", action="store_true",
                   help="no HTML page or failure pictures beside the reports (faster: for scripts)")
    p.add_argument("--cpus", type=cpu_list, metavar="LIST",
                   help="grade on these CPU cores only, e.g. 0-7 (batch gives each grade its "
                        "share); the grading processes and workers it starts inherit them")
    p.add_argument("--no-hidden", action="store_true", help="skip hidden_tests/ even if present")
    options.add_arguments(p)
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
    with options.using(options.from_args(args)) as chosen:
        return _grade(args, chosen)


def _grade(args: argparse.Namespace, chosen: options.Options) -> int:
    """Check the arguments, grade, write the reports: main's exit status."""
    from grader.judge.machine import target as targets

    wanted = chosen.target
    try:
        targets.lookup(wanted)
    except targets.UnknownTarget as e:
        where = "--target" if args.target is not None else "GRADER_TARGET"
        print(f"grader: {where}: {e}", file=sys.stderr)
        return 2
    submission = Path(args.submission)
    if not submission.is_dir():
        print(f"grader: no such folder: {submission}", file=sys.stderr)
        return 2
    paths = [p for p in (args.json, args.markdown, args.gradescope, args.completion_marker) if p]
    try:
        for path in paths:
            report.check_path(path)
    except report.ReportPathError as e:
        print(f"grader: {e}", file=sys.stderr)
        return 2
    if args.cpus:   # before any process starts: every one of them inherits it
        os.sched_setaffinity(0, args.cpus)
    nonce = None
    if args.completion_marker:
        nonce = sys.stdin.readline().strip()
        if not nonce:
            print("grader: --completion-marker needs a nonce on the first line of stdin", file=sys.stderr)
            return 2

    from grader.progress import progress_display
    from grader.run import grade

    from grader.sandbox import calllog   # the timeline of --call-log (tools.call_costs)

    with calllog.span("warm_up"):
        warm_up()
    with progress_display(enabled=not args.quiet, submission=submission) as progress:
        result = grade(submission, args.exercises, args.layers, include_hidden=not args.no_hidden,
                       only_checks=args.checks, progress=progress, target=wanted)
    # every worker has stopped: only now are reports written
    try:
        with calllog.span("reports"):
            if not args.quiet:
                report.print_terminal(result, details=args.markdown, page=None if args.no_page
                                      else report.page_path(args.markdown, args.json))
            written = report.write(result, args.json, args.markdown, args.gradescope,
                                   page=not args.no_page)
            if nonce is not None:
                report.seal(args.completion_marker, nonce, written)
    except report.ReportPathError as e:
        print(f"grader: {e}", file=sys.stderr)
        return 3
    if result.grading_failed:   # the reports say so too; run_autograder and batch: not graded
        print(f"grader: grading failed: {result.grading_failed}", file=sys.stderr)
        return 3
    return 0
