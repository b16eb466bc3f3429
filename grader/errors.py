"""What can go wrong when the trusted side calls into student code.

Each class maps to one report status (see `grader.plugin`): a check that raises one of these
is scored with that status and the message, never with a traceback from the grader.
"""


class StudentProblem(Exception):
    """Base: something about the submission, not the grader, stopped the check."""

    status = "error"


class FileProblem(StudentProblem):
    """The exercise's file could not be run at all: it is missing, the audit refused it, or it
    does not import (a syntax error, an import error, an exception, a crash or a hang at import).
    Every check of the exercise reports it; the report shows it once, first, with no lesson
    hint, and lists the checks it blocked by name."""

    def __init__(self, message: str = "", status: str = "error"):
        super().__init__(message)
        self.status = status


class NotSubmitted(FileProblem):
    """The exercise file is missing from the submission folder."""


class ImportFailed(FileProblem):
    """The exercise's file (or a file it imports) failed while Python imported it."""


class NotImplementedByStudent(StudentProblem):
    """The student code raised NotImplementedError (a stub that has not been filled in)."""

    status = "not_implemented"


class StudentRaised(StudentProblem):
    """The student code raised an exception (at import or during the call)."""

    status = "error"


class StudentTimeout(StudentProblem):
    """A call into student code ran past its time limit; the worker was killed."""

    status = "timeout"


class WorkerCrashed(StudentProblem):
    """The worker process died (segfault, os._exit, illegal memory access, out of memory)."""

    status = "crashed"


class ForgedReply(StudentProblem):
    """A message on the worker's channel that its serving loop did not send: a second reply to
    one request, bytes that are no message, a reply to an earlier request (written by student
    code, which can reach the socket). The call counts for nothing, and no later call of the
    exercise either."""

    status = "error"


class BadReturn(StudentProblem):
    """The student returned something the grader cannot carry back (an object, a generator...)."""

    status = "error"


class GraderError(Exception):
    """The grader itself failed (e.g. the worker could not build a check's inputs): not the
    student's fault, reported as a grader error."""
