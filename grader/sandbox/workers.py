"""The workers of one grading run (`Workers`): one per (exercise, mode), and one replay worker per
(exercise, mode) for provenance, each a grader.sandbox.proxy.Submission made on first use and
reused across checks; the read-only copy of the submission they all import, the run's scratch
folder (a size-limited tmpfs where the grader may mount), and which of them memory lets live.
`close_all` stops a set of workers at once.
"""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grader.sandbox import budget, isolation
from grader.sandbox import scratch as scratch_limit
from grader.sandbox.launcher import copy_sources, remove_tree
from grader.sandbox.proxy import Submission


def close_all(subs) -> None:
    """Stop these workers (Submission.close) all at once: a CUDA worker takes about half a
    second to exit, and nothing waits on one while another exits."""
    subs = list(subs)
    with ThreadPoolExecutor(max(1, len(subs))) as pool:
        list(pool.map(lambda sub: sub.close(), subs))


class Workers:
    """All workers of one grading run: one per (exercise, mode), reused across checks; where
    memory is short (grader.sandbox.budget), only the current exercise's are kept alive.

    `sources` holds the read-only copy of the submission's `.py` files that every worker imports
    (made once per run); `isolation` describes the level the workers run at."""

    def __init__(self, directory: Path, scratch: Path | None = None):
        self.directory = Path(directory)
        self._own_scratch = scratch is None
        self.scratch = Path(scratch or tempfile.mkdtemp(prefix="grader-"))
        self.level = isolation.choose()
        if self._own_scratch and self.level.as_student:
            scratch_limit.limit(self.scratch)   # the whole run's files: a size limit (ENOSPC)
        self.isolation = self.level.description
        self.sources = copy_sources(self.directory, self.scratch / "sources")
        self._subs: dict[tuple[str, str], Submission] = {}
        self._seccomp: dict[str, str] = {}   # mode -> level, of workers already closed

    def get(self, exercise: str, mode: str = "cpu") -> Submission:
        key = (exercise, mode)
        if budget.one_exercise_at_a_time():   # little memory: stop the other exercises' workers
            for (other, _), sub in self._subs.items():
                if other != exercise:
                    sub.close()
        if key not in self._subs:
            self._subs[key] = Submission(exercise, self.directory, mode,
                                         self.scratch / f"{exercise}-{mode}", self.sources, self.level)
        return self._subs[key]

    def replayer(self, exercise: str, mode: str, sources: Path) -> Submission:
        """The replay worker of (exercise, mode): imports `sources`, the filtered copy of the
        submission (grader.judge.evidence.provenance), reused across calls like every worker. Mode "cpu"
        is the front end's worker of the interp layer: one serves every exercise of the run."""
        key = ("compile" if mode == "cpu" else exercise, f"{mode}:replay")
        if key not in self._subs:
            self._subs[key] = Submission(exercise, self.directory, mode,
                                         self.scratch / f"{exercise}-{mode}-replay", sources,
                                         self.level, cache="replay")
        return self._subs[key]

    def all(self) -> list[Submission]:
        return list(self._subs.values())

    @property
    def seccomp(self) -> str:
        """The seccomp filter's level per mode of the workers that started, one line."""
        levels = {**self._seccomp, **self._levels()}
        return "; ".join(f"{mode}: {level}" for mode, level in sorted(levels.items()))

    def _levels(self) -> dict[str, str]:
        # a replay worker's mode reads "interp replay" (its key is "interp:replay")
        return {mode.replace(":", " "): sub.seccomp for (_, mode), sub in self._subs.items()
                if sub.seccomp}

    def close(self) -> None:
        self._seccomp.update(self._levels())   # the report names them after the close
        close_all(self._subs.values())
        self._subs.clear()
        if self._own_scratch:
            remove_tree(self.scratch)
