"""Where a measurement becomes credit. A graded-by-degree check (the perf layer) measures, and
asks here what that is worth: the thresholds are data, an exercise's `bands` (its rows.py), with
a device profile's own where the exercise gives one (`device_bands`, by profile key). Nothing
else in the grader writes a threshold of partial credit.

    fraction = verdicts.credit("flash_triton", "vs_sdpa", ms / sdpa_ms, gpu.profile)
    verdicts.terms("flash_triton", "vs_sdpa", gpu.profile)   # "full marks at 3x or better, ..."
"""

from __future__ import annotations

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
