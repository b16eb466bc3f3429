"""How an exception from student code is described for the trusted side: its kind (not
implemented, sys.exit, any other), the traceback cut to the submission's frames, the file and
line as a compiler names them (`where_in`), and, where the seccomp filter refused a fork, an exec
or a thread, a sentence that says so. What is sent is plain `str` (`str.__str__`), whatever
subclass student code's exception hands back, and an exception whose message cannot be read
is sent without it.
"""

from __future__ import annotations

import errno
import os
import traceback


def failure(e: BaseException, at: str, student_file: str, walled: bool = False) -> dict:
    """Describe an exception from student code for the trusted side. `walled`: the seccomp
    filter is installed, so an EPERM from a fork or an exec is its answer."""
    if isinstance(e, NotImplementedError):
        kind = "not_implemented"
    elif isinstance(e, SystemExit):
        kind = "exit"
    else:
        kind = "exception"
    folder = os.path.join(os.path.dirname(student_file), "")
    try:
        tb = traceback.format_exception(type(e), e, e.__traceback__)
        # keep the frames that point into the submission's files, and the error line itself
        keep = [line for line in tb if folder in line or not line.startswith("  File")]
        text = "".join(keep[-12:])
        message = str(e) if not isinstance(e, SystemExit) else f"sys.exit({e.code!r}) was called"
        if type(e) in (SyntaxError, IndentationError, TabError) and isinstance(e.msg, str):
            message = e.msg   # str(e) repeats the file and line, which `where` gives
        if walled and hit_the_wall(e):
            message += NO_THREADS_OR_PROCESSES
    except BaseException:  # noqa: BLE001 - an exception whose __str__ raises, or a huge exit code
        text, message = "", "(its message could not be shown)"
    return {"ok": False, "kind": kind, "type": str.__str__(type(e).__name__)[:200],
            "message": str.__str__(message)[:2000], "traceback": str.__str__(text)[-3000:], "at": at,
            "where": where_in(e, folder)}


def where_in(e: BaseException, folder: str) -> dict | None:
    """The submission's file and line where `e` was raised, as a compiler names it: the last
    traceback frame in a file of `folder`, or a syntax error's own position; with the line's
    code. None when no frame of the submission is on the traceback."""
    try:
        if type(e) in (SyntaxError, IndentationError, TabError) and \
                str.__str__(e.filename or "").startswith(folder):
            file, line, code = e.filename, e.lineno, e.text
        else:
            frames = [f for f in traceback.extract_tb(e.__traceback__)
                      if f.filename.startswith(folder)]
            if not frames:
                return None
            file, line, code = frames[-1].filename, frames[-1].lineno, frames[-1].line
        return {"file": os.path.basename(str.__str__(file))[:200], "line": int(line or 0),
                "code": str.__str__(code or "").strip()[:300]}
    except BaseException:  # noqa: BLE001 - a position that cannot be read is left out
        return None


NO_THREADS_OR_PROCESSES = (" (the grader runs the exercise without threads or processes, so this "
                           "cannot work here; the lesson's code needs neither)")


def hit_the_wall(e: BaseException) -> bool:
    """Whether `e` is what the seccomp filter makes of a fork, an exec or a new thread."""
    if isinstance(e, OSError) and e.errno == errno.EPERM:
        return True
    return isinstance(e, RuntimeError) and "can't start new thread" in str(e)
