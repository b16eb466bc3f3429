"""Progress of a grading run: one header line, then, on a terminal, rich's live progress display
(exercise, layer, check, how many of the selected checks ran). Logs and CI get the header only.
The display is transient: it is gone before the report prints."""

from __future__ import annotations

import contextlib
import os
import sys

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from grader import options


def _live() -> bool:
    return (sys.stderr.isatty() and os.environ.get("TERM") != "dumb"
            and not os.environ.get("CI") and not options.current().plain)


@contextlib.contextmanager
def progress_display(enabled: bool, submission):
    """Yields progress(check, done, total) for grader.run.grade, or None when disabled."""
    if not enabled:
        yield None
        return
    out = sys.stdout   # grade() redirects stdout while pytest runs; the header goes here
    state = {"header": False, "task": None}
    bar = None
    if _live():
        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TimeElapsedColumn(), console=Console(file=sys.stderr), transient=True,
                       redirect_stdout=False, redirect_stderr=False)   # grade() redirects stdout itself

    def progress(check, done: int, total: int) -> None:
        if not state["header"]:
            state["header"] = True
            print(f"Grading {submission}: {total} checks ...", file=out, flush=True)
            if bar is not None:
                bar.start()
                state["task"] = bar.add_task("", total=total)
        if bar is not None:
            bar.update(state["task"], completed=done,
                       description=escape(f"{check.exercise} [{check.layer}] {check.id.split('.', 1)[1]}"))

    try:
        yield progress
    finally:
        if bar is not None and state["task"] is not None:
            bar.stop()
