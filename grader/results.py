"""Plain result types of a grading run: what the plugin records and the reports read.

No pytest and no student code here, so every module can import them without a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.registry import Check


@dataclass
class Result:
    check: Check
    status: str
    score: float
    message: str = ""
    output: str = ""          # what the student code printed during the check, shortened
    duration_s: float = 0.0
    failure_hint: str = ""    # the hint this failure's evidence gave (CheckFailed.hint), if any
    # the checks this failure's evidence says explain it (CheckFailed.follows); None: Check.follows
    failure_follows: tuple | None = None
    # the grader's own machinery failed (a worker that could not start, no sandbox, a defect):
    # not the student's doing, so no lesson hint, and the grade as a whole is not a grade
    grader_error: bool = False
    # failed only because another check's idea failed in the same call (CheckFailed.secondary):
    # the report groups it under that check and never groups anything under it
    secondary: bool = False
    # a graded-by-degree check whose readings left its credit open (grader.judge.perf.verdicts.Tally):
    # the sentence saying so; graded at the medians all the same
    undecided: str = ""
    # the exercise's file could not be run at all (errors.FileProblem: missing, refused by the
    # audit, failed at import): shown once per exercise, first, with no lesson hint
    file_error: bool = False
    # a secondary failure's hint, from the whole report's failures (GradeReport.explain_secondary)
    report_hint: str = ""
    # where a failed comparison is wrong (CheckFailed.picture, grader/judge/answers/pictured.py): plain
    # JSON, drawn by grader/report/pictures.py; None when the failure compared no values
    picture: dict | None = None

    def __post_init__(self):
        """An advice check (Check.advice) that failed is advice: status "advice", 0 points, its
        message saying so. A stub, a file that could not run and the grader's own failure keep
        their status: they say nothing about the idea; so does a secondary failure (the call's
        answer was wrong: the correctness checks' business), which stays a failure worth 0,
        grouped under theirs."""
        if getattr(self.check, "advice", False):
            self.score = 0.0
            if (self.status in ADVISED and not self.secondary and not self.grader_error
                    and not self.file_error):
                self.status = "advice"
                if not self.message.startswith(ADVICE_PREFIX):
                    self.message = ADVICE_PREFIX + self.message

    @property
    def hint(self) -> str:
        """What to revisit: the failure's own hint, else the registry's; none for a pass, a
        failure of the grader's own or a file that could not be run."""
        if self.status in ("passed", "not_run") or self.grader_error or self.file_error:
            return ""
        return self.failure_hint or self.report_hint or self.check.hint

    @property
    def max_score(self) -> float:
        return 0.0 if self.status == "not_run" else self.check.points


@dataclass
class Credit:
    """Partial credit for graded-by-degree checks (perf): `credit.set(0.5, "1.9x of SDPA")`."""

    fraction: float = 1.0
    note: str = ""
    undecided: str = ""   # why this run's readings leave the credit open (verdicts.Tally)

    def set(self, fraction: float, note: str = "", undecided: str = "") -> None:
        """`undecided`: the sentence saying the measurement did not decide the credit; it ends
        the note too."""
        self.fraction = max(0.0, min(1.0, float(fraction)))
        said = f"{undecided[:1].upper()}{undecided[1:]}"
        self.note = ". ".join(part for part in (note, said) if part)
        self.undecided = undecided


@dataclass
class Selection:
    exercises: list[str]
    layers: list[str]
    layer_reasons: dict = field(default_factory=dict)   # layer -> why it does not run
    only_checks: list[str] | None = None                 # --checks: run just these ids
    elsewhere: frozenset = frozenset()                   # (exercise, layer): in a parallel process


FAILING = ("failed", "error", "timeout", "crashed", "not_implemented")
# the statuses an advice check's failure becomes "advice" from (Result.__post_init__): it costs
# nothing, is no failure (not in FAILING) and never leads a report
ADVISED = ("failed", "error", "timeout", "crashed")
ADVICE_PREFIX = "advice, no points: "
NOT_SELECTED = "exercise not selected"
PARALLEL = "graded in a parallel process"   # why the in-process session skips a split check


@dataclass
class GradeReport:
    submission: str
    device: str
    results: list[Result]
    elapsed_s: float
    layers_run: list[str]
    layers_not_run: dict[str, str]
    layer_seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    device_info: dict = field(default_factory=dict)   # GPU details and ceilings measured in the run
    isolation: str = ""   # how student code was isolated (grader.sandbox.isolation), one line
    seccomp: str = ""     # what the kernel denied the workers, per mode (grader.worker.seccomp)
    target: dict = field(default_factory=dict)   # grader.judge.machine.target.Evidence.to_dict(); {}: none
    timed_first: bool = False   # the timed checks ran first, verified afterwards (grader.schedule.timed_first)

    def __post_init__(self):
        self.explain_secondary()

    def explained_by(self, r: Result) -> list[str]:
        """The failing checks that show secondary failure `r`'s wrong answer: its `follows`
        that failed, else its exercise's other failures; only checks of their own idea (not
        secondary, not advice, not a file that could not run). The report's hint names them
        and its grouping puts `r` under the first (grader.report.summary.failures)."""
        primary = {q.check.id: q for q in self.results
                   if q.status in FAILING and not q.secondary and not q.file_error
                   and not getattr(q.check, "advice", False)}
        follows = r.failure_follows if r.failure_follows is not None else r.check.follows
        return [c for c in follows or () if c in primary and c != r.check.id] or \
            [c for c, q in primary.items() if q.check.exercise == r.check.exercise]

    def explain_secondary(self) -> None:
        """A secondary failure (a property on a wrong answer, CheckFailed.secondary) says only
        what its evidence shows: the answer was wrong. Its hint names the checks that failed
        and show it (`explained_by`), never one that passed; where none failed, it says the
        wrong answer showed only here."""
        for r in self.results:
            if not r.secondary or r.status not in FAILING or r.failure_hint:
                r.report_hint = ""
                continue
            named = self.explained_by(r)
            if named:
                r.report_hint = (f"The answer was wrong, so this check's own idea earns nothing "
                                 f"yet: fix what {' and '.join(named[:2])} "
                                 f"{'say' if len(named) > 1 else 'says'} first.")
            else:
                r.report_hint = ("The answer was wrong on this check's inputs (the message says "
                                 "where), though the correctness checks passed on theirs: compare "
                                 "its sizes and values with theirs.")

    @property
    def score(self) -> float:
        return round(sum(r.score for r in self.results), 3)

    @property
    def grading_failed(self) -> str:
        """Why this is not a grade ("" when it is): the first failure of the grader's own."""
        failed = [r for r in self.results if r.grader_error]
        if not failed:
            return ""
        cause = failed[0].message.removeprefix("grader error (").split("); this is not your")[0]
        return f"on {len(failed)} checks, the first {failed[0].check.id}: {cause[:400]}"

    @property
    def max_score(self) -> float:
        return round(sum(r.max_score for r in self.results), 3)
