"""Where a measurement becomes credit. A graded-by-degree check (the perf layer) measures, and
asks here what that is worth: the thresholds are data, an exercise's `bands` (its rows.py), with
a device profile's own where the exercise gives one (`device_bands`, by profile key). Nothing
else in the grader writes a threshold of partial credit.

    fraction = verdicts.credit("flash_triton", "vs_sdpa", ms / sdpa_ms, gpu.profile)
    verdicts.terms("flash_triton", "vs_sdpa", gpu.profile)   # "full marks at 3x or better, ..."
"""

from __future__ import annotations

import math

from grader.registry import EXERCISES
from grader.schema import Band


def band(exercise: str, measure: str, profile=None) -> Band:
    """The band of one measurement: the profile's (by its key) if the exercise gives one, else
    the exercise's own. A measurement with no band is the grader's defect (KeyError)."""
    ex = EXERCISES[exercise]
    key = getattr(profile, "key", "") or ""
    return ex.device_bands.get(key, {}).get(measure) or ex.bands[measure]


def linear(value: float, full: float, zero: float) -> float:
    """Credit in [0, 1]: 1 at `full` or better, 0 at `zero` or worse, linear in between; works
    both ways (a time ratio, full=3, zero=6; a fraction of a ceiling, full=0.6, zero=0.15)."""
    if math.isnan(value):
        return 0.0
    if full == zero:
        return 1.0 if value == full else 0.0
    return min(1.0, max(0.0, (value - zero) / (full - zero)))


def credit(exercise: str, measure: str, value: float, profile=None) -> float:
    b = band(exercise, measure, profile)
    return linear(value, b.full, b.zero)


def terms(exercise: str, measure: str, profile=None, unit: str = "") -> str:
    """The band in words, for the check's note: "full marks at 3x or better, none at 6x"."""
    b = band(exercise, measure, profile)
    better = "or less" if b.full < b.zero else "or more"
    return f"full marks at {b.full:g}{unit} {better}, none at {b.zero:g}{unit}"


# How far this run's readings may leave a check's credit open (a fraction of its points) and
# still decide it: beyond, the check takes more samples where it can (timing.per_call_ms's
# `settled`), and says so when even they leave it open.
DECIDED = 0.05


def decided(exercise: str, measure: str, low: float, high: float, profile=None) -> bool:
    """Whether the credit is the same, to within DECIDED, anywhere between `low` and `high`."""
    return abs(credit(exercise, measure, low, profile)
               - credit(exercise, measure, high, profile)) <= DECIDED


def settles(exercise: str, measure: str, to_value, profile=None):
    """timing.per_call_ms's `settled` for a time whose measured value is `to_value(ms)`: true
    when the credit is decided across the reading's range (timing.span: kept above zero, so a
    range that reaches zero is a time far too fast, judged by the check's floor)."""
    from grader.judge.perf.timing import span

    return lambda r: decided(exercise, measure, *(to_value(t) for t in span(r)), profile)


def settles_over(exercise: str, measure: str, bottom, profile=None):
    """timing.per_call_ms's `settled` for a time judged as its ratio to `bottom`, a reading
    taken before it (Tally.ratio's measurement): true when the credit is decided across both
    readings' ranges."""
    from grader.judge.perf.timing import ratio_span, span

    return lambda r: decided(exercise, measure, *ratio_span(span(r), span(bottom)), profile)


class Tally:
    """The credit of a check made of several measurements, a weighted mean of each one's, and
    how far this run's readings leave it open: each measurement's credit at either end of its
    range (a timing.Reading's low and high, turned into the measured value).

        tally = verdicts.Tally("flash_triton", gpu.profile)
        tally.reading("vs_sdpa", ms, lambda t: t / base)   # ms: a timing.Reading
        credit.set(tally.fraction, note, undecided=tally.undecided())
    """

    def __init__(self, exercise: str, profile=None):
        self.exercise, self.profile = exercise, profile
        self.parts: list[tuple[float, float, float, float]] = []   # (weight, credit, lo, hi)

    def add(self, measure: str, value: float, low: float | None = None,
            high: float | None = None, weight: float = 1.0) -> float:
        """One measurement's credit at `value`; `low` and `high` (either order) bound it."""
        got = credit(self.exercise, measure, value, self.profile)
        ends = [credit(self.exercise, measure, v, self.profile)
                for v in (low, high) if v is not None] or [got]
        self.parts.append((weight, got, min(ends + [got]), max(ends + [got])))
        return got

    def reading(self, measure: str, ms, to_value, weight: float = 1.0, less: float = 0.0) -> float:
        """One measurement made of one time, `ms` (a timing.Reading; a plain float has no
        range) less `less` (the harness's cost): its value is `to_value(ms - less)`, its ends
        those of timing.span(ms, less)."""
        from grader.judge.perf.timing import span

        return self.add(measure, to_value(float(ms) - less), *(to_value(t) for t in span(ms, less)),
                        weight=weight)

    def ratio(self, measure: str, top, bottom, less: float = 0.0, weight: float = 1.0) -> float:
        """One measurement that is the ratio of two times (timing.Readings, or plain floats),
        each less `less`: its ends the smallest and largest ratio across both ranges."""
        from grader.judge.perf.timing import ratio_span, span

        return self.add(measure, (float(top) - less) / (float(bottom) - less),
                        *ratio_span(span(top, less), span(bottom, less)), weight=weight)

    def include(self, other: "Tally", weight: float = 1.0) -> float:
        """Another tally's credit as one measurement of this one (a check that averages parts
        which are themselves weighted: softmax_long's widths)."""
        self.parts.append((weight, other.fraction, other._mean(2), other._mean(3)))
        return other.fraction

    def _mean(self, i: int) -> float:
        total = sum(p[0] for p in self.parts)
        return sum(p[0] * p[i] for p in self.parts) / total if total else 0.0

    @property
    def fraction(self) -> float:
        return self._mean(1)

    def undecided(self) -> str:
        """"" when the readings decide the credit to within DECIDED, else the sentence saying
        that they do not, for the report."""
        lo, hi = self._mean(2), self._mean(3)
        if hi - lo <= DECIDED:
            return ""
        return (f"not decided in this run: its readings put the credit anywhere from {lo:.0%} to "
                f"{hi:.0%} of the points (more than {DECIDED:.0%} apart); graded at the medians, "
                f"{self.fraction:.0%}; grading again on a quiet GPU decides it")
