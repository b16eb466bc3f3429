"""Checks for exercises/online_softmax.py (lesson: "Softmax, the safe way", "Online softmax").

Every check draws fresh inputs from `rng`, computes the float64 reference here, in the trusted
process, and calls the student's functions through the worker proxy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from grader.judge import reference
from grader.judge.compare import CheckFailed, assert_close
from grader.judge.inputs import chunks, randn

LENGTHS = (1, 7, 1000, 4097)
SCALES = (1, 10, 100)
EMPTY = (float("-inf"), 0.0)


def _state(value, what: str) -> tuple[float, float]:
    """(m, l) returned by the student, as two floats, or a clear failure."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise CheckFailed(f"{what}: expected a pair (m, l), got {type(value).__name__} {value!r:.80}")
    try:
        return float(value[0]), float(value[1])
    except (TypeError, ValueError):
        raise CheckFailed(f"{what}: expected two numbers (m, l), got {value!r:.80}") from None


def assert_state(got, expected: tuple[float, float], what: str, seed: int, rtol: float = 1e-9) -> None:
    m, l = _state(got, what)
    em, el = expected
    if not (m == em or math.isclose(m, em, rel_tol=rtol, abs_tol=1e-12)):
        raise CheckFailed(f"{what}: expected m = {em!r}, got m = {m!r} [seed {seed}]")
    if not math.isclose(l, el, rel_tol=rtol, abs_tol=1e-12):
        raise CheckFailed(f"{what}: expected l = {el!r} (sum of exp(x - m)), got l = {l!r} "
                          f"(m = {m!r}) [seed {seed}]")


@pytest.mark.check("online_softmax.safe_matches_float64")
def test_safe_matches_float64(student, rng):
    sub = student()
    for scale in SCALES:
        for n in LENGTHS:
            x = randn(rng, n, "float64", scale)
            assert_close(sub.softmax_safe(x), reference.softmax(x), what="softmax_safe(x)",
                         dtype="float64", case=f"n={n}, scale={scale}", seed=rng.seed)


@pytest.mark.check("online_softmax.online_max_sum")
def test_online_max_sum(student, rng):
    sub = student()
    for scale in SCALES:
        for n in (1, 7, 1000):
            x = randn(rng, n, "float64", scale)
            # rising inputs move the max at every step, so a max that is never updated shows
            for case, xs in (("random", x), ("increasing", np.sort(x))):
                assert_state(sub.online_max_sum(xs), reference.max_sum(xs),
                             f"online_max_sum(x) (n={n}, scale={scale}, {case})", rng.seed)


@pytest.mark.check("online_softmax.online_matches_float64")
def test_online_matches_float64(student, rng):
    sub = student()
    for scale in SCALES:
        for n in LENGTHS:
            x = randn(rng, n, "float64", scale)
            assert_close(sub.softmax_online(x), reference.softmax(x), what="softmax_online(x)",
                         dtype="float64", case=f"n={n}, scale={scale}", seed=rng.seed)


@pytest.mark.check("online_softmax.merge_chunks")
def test_merge_chunks(student, rng):
    sub = student()
    for scale in SCALES:
        x = randn(rng, 10_000, "float64", scale)
        states = [sub.online_max_sum(x[s]) for s in chunks(rng, x.size, 7)]
        expected = reference.max_sum(x)
        # left to right, in a shuffled order, and as a balanced tree: merge must be associative
        # and commutative, so the order cannot matter
        orders = {"left to right": list(range(7)), "shuffled": rng.permutation(7).tolist()}
        for name, order in orders.items():
            acc = EMPTY
            for i in order:
                acc = sub.merge(acc, states[i])
            assert_state(acc, expected, f"merging 7 chunks {name} (scale {scale})", rng.seed)
        level = list(states)
        while len(level) > 1:
            level = [sub.merge(level[i], level[i + 1]) if i + 1 < len(level) else level[i]
                     for i in range(0, len(level), 2)]
        assert_state(level[0], expected, f"merging 7 chunks as a tree (scale {scale})", rng.seed)


@pytest.mark.check("online_softmax.merge_empty_identity")
def test_merge_empty_identity(student, rng):
    sub = student()
    x = randn(rng, 100, "float64", 10)
    state = reference.max_sum(x)
    assert_state(sub.merge(EMPTY, state), state, "merge((-inf, 0), s)", rng.seed)
    assert_state(sub.merge(state, EMPTY), state, "merge(s, (-inf, 0))", rng.seed)
    m, l = _state(sub.merge(EMPTY, EMPTY), "merge((-inf, 0), (-inf, 0))")
    if not (m == float("-inf") and l == 0.0):
        raise CheckFailed(f"merge((-inf, 0), (-inf, 0)): expected (-inf, 0.0), got ({m!r}, {l!r})")


@pytest.mark.check("online_softmax.no_overflow")
def test_no_overflow(student, rng):
    sub = student()
    shift = float(rng.uniform(0, 5))
    for base in (1000.0, -1000.0):
        x = np.array([base, base + 1, base + 2]) + shift
        expected = reference.softmax(x)
        for fn in ("softmax_safe", "softmax_online"):
            assert_close(getattr(sub, fn)(x), expected, what=f"{fn}({x.tolist()})", dtype="float64")
        assert_state(sub.online_max_sum(x), reference.max_sum(x), f"online_max_sum({x.tolist()})",
                     rng.seed)


@pytest.mark.check("online_softmax.edge_inputs")
def test_edge_inputs(student, rng):
    sub = student()
    one = randn(rng, 1, "float64", 100)
    for fn in ("softmax_safe", "softmax_online"):
        assert_close(getattr(sub, fn)(one), np.ones(1), what=f"{fn} of one element {one.tolist()}",
                     dtype="float64")
    assert_state(sub.online_max_sum(one), (float(one[0]), 1.0), "online_max_sum of one element", rng.seed)
    # float16 scores well past exp's overflow at 11.09; the result must stay float16
    x16 = randn(rng, 781, "float16", 20)
    expected = reference.softmax(x16.astype(np.float64))
    for fn in ("softmax_safe", "softmax_online"):
        assert_close(getattr(sub, fn)(x16), expected, what=f"{fn}(float16 x * 20)",
                     dtype="float16", seed=rng.seed)
