"""How io_model's checks call the student and judge one answer: a count must equal the grader's
formula exactly (Python integers, no rounding), a real-valued answer within a relative 1e-9 (the
same formula in another order differs by a few float64 roundings, a rounded constant by 1e-4),
and a hint only when the answer equals a known mistake's (mistakes.py). The check modules and the
hidden checks import these."""

from __future__ import annotations

import math
import numbers

from grader.exercises.io_model import reference
from grader.exercises.io_model.mistakes import MISTAKES, ROUNDED
from grader.judge.answers.compare import CheckFailed
from grader.judge.answers.cases import Cases

RTOL = 1e-9


def plain(got, what: str):
    """The student's answer as a Python int, float or str; CheckFailed for anything else."""
    if hasattr(got, "item") and getattr(got, "shape", None) == ():
        got = got.item()                      # a NumPy scalar
    if isinstance(got, bool) or not isinstance(got, (numbers.Real, str)):
        raise CheckFailed(f"{what}: expected a number, got {type(got).__name__} {got!r:.80}")
    return got


def same(got, want, exact: bool) -> bool:
    if isinstance(want, str) or isinstance(got, str):
        return got == want
    if not math.isfinite(got):
        return False
    return got == want if exact else math.isclose(got, want, rel_tol=RTOL, abs_tol=0.0)


def mistakes(fn: str, args: tuple, got) -> list[str]:
    """The known mistakes (mistakes.MISTAKES) whose answer at `args` equals `got`, by name."""
    found = []
    for name, answer, _ in MISTAKES.get(fn, []):
        try:
            wrong = answer(*args)
        except (ZeroDivisionError, ValueError, OverflowError):
            continue
        if same(got, wrong, exact=False):
            found.append(name)
    if fn == "exp_overflow" and not found and not isinstance(got, str) and math.isfinite(got):
        want = reference.exp_overflow(*args)
        if abs(got - want) <= 1e-2 * abs(want):
            found.append("rounded")
    return found


def hint_for(fn: str, names) -> str:
    hints = {name: hint for name, _, hint in MISTAKES.get(fn, [])}
    hints["rounded"] = ROUNDED
    return next((hints[n] for n in names if n in hints), "")


class WrongAnswer(CheckFailed):
    """One wrong answer, with the known mistakes its value equals."""

    def __init__(self, message: str, names: list[str], hint: str):
        super().__init__(message, hint=hint)
        self.names = names


def describe(value) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, int):
        return f"{value:,}" + (f" ({value:.4g})" if abs(value) >= 1e6 else "")
    return f"{value:.12g}"


def check_answer(sub, fn: str, args: tuple, *, exact: bool, case: str, seed: int) -> None:
    """Call `fn(*args)` in the worker; WrongAnswer unless it equals the grader's formula."""
    want = getattr(reference, fn)(*args)
    what = f"{fn}{args}"
    got = plain(getattr(sub, fn)(*args), what)
    if same(got, want, exact):
        return
    ratio = ""
    if not isinstance(got, str) and not isinstance(want, str) and want and math.isfinite(got):
        ratio = f", {got / want:.4g}x the right answer"
    rule = "exactly" if exact else f"within a relative {RTOL:g}"
    names = mistakes(fn, args, got)
    raise WrongAnswer(f"{what} [{case}, seed {seed}]: expected {describe(want)} ({rule}), got "
                      f"{describe(got)}{ratio}", names, hint_for(fn, names))


def check_all(sub, fn: str, calls, credit, *, exact: bool, seed: int) -> None:
    """check_answer on every (args, label) of `calls`, as the cases of one check. Every case
    runs; the failure quotes the first wrong one, and its hint is the known mistake whose answer
    equals every wrong answer seen (one case alone can fit two mistakes)."""
    cases = Cases(credit)
    wrong: list[WrongAnswer] = []
    for args, label in calls:
        with cases.case(f"{fn}{tuple(args)}, {label}", seed=seed):
            try:
                check_answer(sub, fn, tuple(args), exact=exact, case=label, seed=seed)
            except WrongAnswer as e:
                wrong.append(e)
    cases.finish()
    if wrong:
        every = [n for n in wrong[0].names if all(n in w.names for w in wrong)]
        raise CheckFailed(f"{wrong[0]} ({len(wrong)} of {len(calls)} cases wrong)",
                          hint=hint_for(fn, every))
