"""Reports of one grading run: terminal (rich), Markdown, JSON, the HTML page, the pictures of
failed comparisons and Gradescope's results.json.

All are written by the trusted process from `GradeReport`, after every worker has stopped.
`write` puts each file in place atomically (a temporary file in the same folder, then
os.replace), so a reader sees the old file or the whole new one, and a name a submission
planted (a file, a symlink) is replaced, not followed. `seal` then writes the completion
marker that `run_autograder` and `batch` check before they accept a report.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from grader.report import pictures, summary
from grader.report.formats import to_gradescope, to_json
from grader.report.markdown import to_markdown
from grader.report.page import to_html
from grader.report.terminal import device_line, print_terminal

__all__ = ["to_json", "to_gradescope", "to_markdown", "to_html", "print_terminal", "device_line",
           "write", "seal", "check_path", "page_path", "ReportPathError"]


class ReportPathError(Exception):
    """A report cannot be written where it was asked for; the message is one line."""


def check_path(path) -> None:
    """Fail early, before grading, on a report path that cannot be written."""
    path = Path(path)
    if path.is_dir():
        raise ReportPathError(f"the report path {path} is a folder, not a file")
    parent = next((p for p in [path.parent, *path.parent.parents] if p.exists()), None)
    if parent is not None and (not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK)):
        raise ReportPathError(f"cannot write the report {path}: {parent} is not a writable folder")


def write_atomic(path, text: str | bytes) -> str:
    """Write text (or bytes) to path through a temporary file and os.replace; its SHA-256."""
    path = Path(path)
    check_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise ReportPathError(f"cannot write the report {path}: {e.strerror or e}") from None
    data = text if isinstance(text, bytes) else text.encode()
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise ReportPathError(f"cannot write the report {path}: {e.strerror or e}") from None
    return hashlib.sha256(data).hexdigest()


def page_path(markdown_path=None, json_path=None) -> Path | None:
    """The HTML page beside the Markdown report (else the JSON one): reports/grade.md ->
    reports/grade.html; None when neither is written."""
    if not (markdown_path or json_path):
        return None
    base = Path(markdown_path or json_path)
    return base.with_suffix(".html") if base.suffix != ".html" else base.with_suffix(".page.html")


def write(report, json_path=None, markdown_path=None, gradescope_path=None,
          page: bool = True) -> dict[str, str]:
    """Write the reports asked for, and (unless `page` is False) beside the Markdown (else the
    JSON) report the page and pictures/<check>.png for every failed comparison; {absolute path:
    SHA-256} of each file written. Pictures are drawn only when a comparison failed
    (pictures.render_all). The page shows `make bench`'s last Measure too, where one lies beside
    it (reports/bench)."""
    page = page_path(markdown_path, json_path) if page else None
    pngs = pictures.render_all(report) if page or gradescope_path else {}
    written = {}
    for path, text in ((json_path, lambda: json.dumps(to_json(report), indent=1)),
                       (markdown_path, lambda: to_markdown(report)),
                       (gradescope_path, lambda: json.dumps(to_gradescope(report, pngs), indent=1)),
                       (page, lambda: to_html(report, pngs, _bench_beside(page)))):
        if path:
            written[str(Path(path).resolve())] = write_atomic(path, text() + "\n")
    if page:
        folder = page.parent / "pictures"
        try:
            if folder.is_symlink():   # a planted link is replaced by a folder, not followed
                folder.unlink()
            for r in summary.selected(report):   # an earlier run's picture of a check that passed now
                if r.check.id not in pngs:
                    (folder / f"{r.check.id}.png").unlink(missing_ok=True)
        except OSError:
            pass   # the page holds every picture; these files are a convenience
        written.update(pictures.write(folder, pngs, write_atomic))
    return written


def _bench_beside(page: Path) -> Path | None:
    folder = Path(page).parent / "bench"
    return folder if (folder / "measure.md").is_file() else None


def seal(marker, nonce: str, written: dict[str, str]) -> None:
    """The completion marker: the nonce, then `sha256sum` lines of the reports written.

    Its first line is the nonce the caller handed over on stdin; `sha256sum --check` reads the
    rest. Written last, so it exists only when every report is complete."""
    lines = [nonce] + [f"{digest}  {path}" for path, digest in written.items()]
    write_atomic(marker, "\n".join(lines) + "\n")
