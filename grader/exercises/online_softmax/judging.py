"""online_softmax's judgement of an (m, l) state, and of the read log of one_pass (advice, no
points): shared by its cpu and adversarial checks and its hidden checks
(hidden_tests/online_softmax/)."""

from __future__ import annotations

import math

import numpy as np

from grader.judge.answers.compare import EPS, CheckFailed, state_rtol


def state_of(value, what: str) -> tuple[float, float]:
    """(m, l) returned by the student, as two floats, or a clear failure."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise CheckFailed(f"{what}: expected a pair (m, l), got {type(value).__name__} {value!r:.80}")
    try:
        return float(value[0]), float(value[1])
    except (TypeError, ValueError):
        raise CheckFailed(f"{what}: expected two numbers (m, l), got {value!r:.80}") from None


def assert_state(got, expected: tuple[float, float], what: str, seed: int, rtol: float | None = None,
                 x=None) -> None:
    """(m, l) equal to `expected` within the tolerance policy (grader/judge/answers/compare.py).

    rtol: on l; by default float32 arithmetic's (`state_rtol`). x: the input, whose magnitude
    bounds what rounding it to float32 may move m and l. l is compared after moving it to the
    reference's max (l * exp(m - m_ref)), so a max rounded in float32 is not counted twice."""
    m, l = state_of(got, what)
    em, el = expected
    rtol = state_rtol("float64", 1) if rtol is None else rtol
    big = float(np.abs(np.asarray(x, dtype=np.float64)).max()) if x is not None and np.size(x) else abs(em) if math.isfinite(em) else 0.0
    m_tol = rtol * abs(em) + 2 * big * EPS["float32"] if math.isfinite(em) else 0.0
    if not (m == em or abs(m - em) <= m_tol):
        raise CheckFailed(f"{what}: expected m = {em!r}, got m = {m!r} [seed {seed}]",
                          hint="m must be the largest value seen: is m updated at every step "
                               "(m = m_new), and does it start at -inf?", kind=_kind(m))
    l_at_ref = l * math.exp(m - em) if math.isfinite(em) and math.isfinite(m) else l
    l_rtol = rtol + 4 * big * EPS["float32"]
    if not math.isclose(l_at_ref, el, rel_tol=l_rtol, abs_tol=1e-12):
        raise CheckFailed(f"{what}: expected l = {el!r} (sum of exp(x - m)), got l = {l!r} "
                          f"(m = {m!r}), {abs(l_at_ref - el) / max(abs(el), 1e-300):.2g} relative "
                          f"error against rtol={l_rtol:.2g} [seed {seed}]",
                          hint="m is right and l is not: every sum measured against an older "
                               "max must be rescaled by exp(m_old - m_new) before it is added.",
                          kind=_kind(l))


def _kind(value: float) -> str:
    """CheckFailed.kind of a wrong number: "nan", "inf" (an overflow's marks) or "values"."""
    return "nan" if math.isnan(value) else "inf" if math.isinf(value) else "values"


def read_log(extras: dict, what: str) -> dict:
    """The recorder's log of x (grader.worker.recorders.collect): {"passes": int, ...}, or a
    failure saying the evidence was missing or malformed (it fails closed, never passes)."""
    logs = extras.get("reads")
    log = logs[0] if isinstance(logs, list) and len(logs) == 1 else None
    passes = log.get("passes") if isinstance(log, dict) else None
    if type(passes) is not int or passes < 0:
        raise CheckFailed(f"{what}: the grader got no readable record of how x was read "
                          f"({type(logs).__name__} {logs!r:.80}), so one pass cannot be seen; "
                          f"the evidence was missing, which is never a pass.",
                          hint="Read x as given (x[i], iteration, slices): the grader's recording "
                               "array logs those reads.")
    return log
