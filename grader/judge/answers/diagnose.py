"""Whether a wrong answer equals a known mistake's, and what a failure's evidence shows: the
generic comparisons that each exercise's mistakes.py names its mistakes with.

An exercise's mistakes.py computes, in the trusted process and from the same inputs, the answer
each mistake would have produced; `first_match` gives the hint of the first one the student's
output equals to tolerance (`equals`, at `tolerance`: the check's own, doubled), and "" when none
does, so no hint is made up. The rest reads a wrong output without naming a mistake: `attend`
(softmax(s) @ v, optionally with padded keys), `zero_or_nan_where_wrong` and `blew_up` (what
went wrong in the elements that are wrong), `rows_named` (which rows, in words).

    hint = first_match(got, [(lambda: answer_of_mistake(x), HINT)], *tolerance("float16"))
"""

from __future__ import annotations

import numpy as np

from grader.judge.answers.compare import TOLERANCES, numpy_tolerance, values


def _f64(x) -> np.ndarray:
    return np.asarray(values(x), dtype=np.float64)


def equals(got, candidate, atol: float, rtol: float) -> bool:
    """got equals candidate everywhere, to tolerance (NaN where the candidate has NaN)."""
    g, c = _f64(got), np.asarray(candidate, dtype=np.float64)
    if g.shape != c.shape or g.size == 0:
        return False
    with np.errstate(all="ignore"):
        ok = np.abs(g - c) <= atol + rtol * np.abs(c)
    ok |= np.isnan(g) & np.isnan(c)
    return bool(ok.all())


def tolerance(dtype: str | None = None, input_dtype: str | None = None, terms: int = 1):
    """The check's own tolerance, doubled: a mistake's answer is computed here in float64,
    while the student's went through the same rounding as a right answer's."""
    if input_dtype is not None:
        atol, rtol = numpy_tolerance(input_dtype, terms)
    else:
        atol, rtol = TOLERANCES.get(dtype or "float32", TOLERANCES["float32"])
    return 2 * atol, 2 * rtol


def first_match(got, candidates, atol: float, rtol: float) -> str:
    """The hint of the first (answer, hint) pair whose answer the output equals, else ""."""
    for make, hint in candidates:
        try:
            with np.errstate(all="ignore"):
                candidate = make()
        except (ValueError, FloatingPointError):
            continue
        if equals(got, candidate, atol, rtol):
            return hint
    return ""


# ------------------------------------------------------------------------------ a wrong output, read


def attend(s, v, divide: bool = True, pad: int = 0) -> np.ndarray:
    """softmax(s) @ v; pad: that many extra keys of score 0 and value 0 in every row."""
    v = np.asarray(v, dtype=np.float64)
    m = s.max(-1, keepdims=True)
    if pad:
        m = np.maximum(m, 0.0)
    p = np.exp(s - m)
    out = p @ v
    if not divide:
        return out
    l = p.sum(-1, keepdims=True) + pad * np.exp(-m)
    return out / l


def zero_or_nan_where_wrong(got, expected, atol: float, rtol: float) -> bool:
    """Every element outside tolerance is 0 or NaN (exp underflowed or 0 / 0), and some are."""
    g, e = _f64(got), np.asarray(expected, dtype=np.float64)
    if g.shape != e.shape:
        return False
    with np.errstate(all="ignore"):
        bad = ~(np.abs(g - e) <= atol + rtol * np.abs(e))
    return bool(bad.any() and (np.isnan(g[bad]) | (g[bad] == 0)).all())


def blew_up(got, expected) -> bool:
    """NaN or inf where the reference is finite: exp overflowed (or a row sum of 0)."""
    g, e = _f64(got), np.asarray(expected, dtype=np.float64)
    return g.shape == e.shape and bool((~np.isfinite(g) & np.isfinite(e)).any())


def rows_named(bad, block: int | None, kind: str) -> str:
    """Which rows a boolean mask marks, in words: 'every row', 'rows 32..44 only (the last key
    block, of 13 rows)' when exactly the ragged last block of `block` rows is wrong, else
    '3 of 45 rows (0, 5..6)' (at most four runs shown)."""
    idx = np.flatnonzero(bad)
    n = len(bad)
    if len(idx) == n:
        return "every row"
    if block:
        lo = (n - 1) // block * block
        if idx[0] >= lo and len(idx) == n - lo:
            return f"rows {lo}..{n - 1} only (the last {kind} block, of {n - lo} rows)"
    runs, start = [], idx[0]
    for a, b in zip(idx, list(idx[1:]) + [None]):
        if b != a + 1:
            runs.append(f"{start}" if start == a else f"{start}..{a}")
            start = b
    return f"{len(idx)} of {n} rows ({', '.join(runs[:4])}{', ...' if len(runs) > 4 else ''})"
