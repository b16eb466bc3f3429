"""cpu checks for exercises/online_softmax.py (lesson: "Softmax, the safe way", "Online softmax").

Every check draws fresh inputs from `rng`, computes the float64 reference here, in the trusted
process, and calls the student's functions through the worker proxy. One idea per check: the
correctness checks use float64 input; float32 and float16 input, the empty row and one element
have checks of their own (test_adversarial.py), and so has how x is read (one pass). Any float
output is accepted (the tolerance policy is in grader/judge/answers/compare.py); an exception costs its
case's share, not the whole check.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader import errors
from grader.exercises.online_softmax.judging import assert_state, read_log, state_of
from grader.judge.answers import reference
from grader.judge.answers.compare import CheckFailed, answer_must_be_right, assert_close, state_rtol
from grader.judge.answers.cases import Cases
from grader.judge.answers.inputs import chunks, randn
from grader.wire.codec import Trusted

LENGTHS = (1, 7, 1000, 4097)
SCALES = (1, 10, 100)
EMPTY = (float("-inf"), 0.0)


def _softmax_cases(sub, fn: str, rng, credit) -> None:
    cases = Cases(credit)
    for scale in SCALES:
        for n in LENGTHS:
            x = randn(rng, n, "float64", scale)
            with cases.case(f"n={n}, float64, randn * {scale}", seed=rng.seed):
                assert_close(getattr(sub, fn)(x), reference.softmax(x), what=f"{fn}(x)",
                             input_dtype="float64", terms=n,
                             case=f"n={n}, float64, randn * {scale}", seed=rng.seed)
    cases.finish()


@pytest.mark.check("online_softmax.safe_matches_float64")
def test_safe_matches_float64(student, rng, credit):
    _softmax_cases(student(), "softmax_safe", rng, credit)


@pytest.mark.check("online_softmax.online_max_sum")
def test_online_max_sum(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for scale in SCALES:
        for n in (1, 7, 1000):
            x = randn(rng, n, "float64", scale)
            # rising inputs move the max at every step, so a max that is never updated shows
            for kind, xs in (("random", x), ("increasing", np.sort(x))):
                case = f"n={n}, float64, randn * {scale}, {kind}"
                with cases.case(case, seed=rng.seed):
                    assert_state(sub.online_max_sum(xs), reference.max_sum(xs),
                                 f"online_max_sum(x) ({case})", rng.seed, state_rtol("float64", n), xs)
    cases.finish()


@pytest.mark.check("online_softmax.one_pass")
def test_one_pass(student, rng, credit):
    """Advice, no points (Check.advice): online_max_sum gets an array that logs its reads
    (grader/worker/read_recorder.py): a whole read (x.max(), np.exp(x), x - m, np.asarray(x)) covers
    all of x; element-wise or chunk-wise reading in order is one pass; going back to the start
    is a second pass. Copies made by x's own methods (x.copy(), x.astype(), x.tolist(),
    np.copy(x)) log into the same record, so two passes over them are two passes. The record is
    built in the student's process, where gc, frames and vars(module) reach it, and no outside
    observer tells one pass over x from one copy then two passes over the copy: it teaches,
    its points are online_max_sum's (docs/SECURITY.md). A missing or unreadable record is
    advice that says so, never a pass."""
    sub = student()
    cases = Cases(credit)
    for n, dtype in ((1000, "float64"), (333, "float32"), (7, "float64")):
        x = randn(rng, n, dtype, 10)
        case = f"n={n}, {dtype}, randn * 10"
        what = f"online_max_sum(x) ({case}) [seed {rng.seed}]"
        with cases.case(case, seed=rng.seed):
            try:
                r = sub.call("online_max_sum",
                             Trusted("read_recorder", params={"values": x, "dtype": dtype}))
            except errors.StudentRaised as e:
                raise CheckFailed(
                    f"{what}: raised when given the grader's recording array: {e}",
                    hint="Here x is an array-like that logs how it is read (len, dtype, x[i], "
                         "iteration, slices, np.asarray(x) and NumPy functions all work on it; "
                         "isinstance(x, np.ndarray) is False). np.asarray(x) gives an ndarray.") from None
            with answer_must_be_right("was recorded", ("online_softmax.online_max_sum",)):
                assert_state(r.value, reference.max_sum(x), what, rng.seed, state_rtol(dtype, n), x)
            reads = read_log(r.extras, what)
            passes = reads["passes"]
            if passes == 0:
                raise CheckFailed(f"{what}: returned the right (m, l) without reading x at all",
                                  hint="Compute (m, l) from the x you are given, in the call.")
            if passes > 1:
                raise CheckFailed(
                    f"{what}: expected one pass over x, got {passes}: after reading x once, "
                    f"the code went back to its start with {reads.get('second_pass')} "
                    f"({reads.get('whole_reads', 0)} whole-array reads in all). The (m, l) is "
                    f"right, but m = x.max() followed by exp(x - m).sum() is the two-pass "
                    f"safe softmax.",
                    hint="Online softmax: one pass, one element at a time. Keep a running max m "
                         "and a running sum l; when m moves, rescale l by exp(m_old - m_new) "
                         "before adding exp(x_i - m_new).")
    cases.finish()


@pytest.mark.check("online_softmax.online_matches_float64")
def test_online_matches_float64(student, rng, credit):
    _softmax_cases(student(), "softmax_online", rng, credit)


@pytest.mark.check("online_softmax.merge_chunks")
def test_merge_chunks(student, rng):
    sub = student()
    for scale in SCALES:
        x = randn(rng, 10_000, "float64", scale)
        parts = chunks(rng, x.size, 7)
        # the (m, l) of each chunk comes from the trusted reference: this check is about merge
        states = [reference.max_sum(x[s]) for s in parts]
        expected = reference.max_sum(x)
        # left to right, in a shuffled order, and as a balanced tree: merge must be associative
        # and commutative, so the order cannot matter
        orders = {"left to right": list(range(7)), "shuffled": rng.permutation(7).tolist()}
        for name, order in orders.items():
            acc = EMPTY
            for i in order:
                acc = sub.merge(acc, states[i])
            assert_state(acc, expected, f"merging 7 chunks {name} (scale {scale})", rng.seed, x=x)
        level = list(states)
        while len(level) > 1:
            level = [sub.merge(level[i], level[i + 1]) if i + 1 < len(level) else level[i]
                     for i in range(0, len(level), 2)]
        assert_state(level[0], expected, f"merging 7 chunks as a tree (scale {scale})", rng.seed, x=x)


@pytest.mark.check("online_softmax.merge_empty_identity")
def test_merge_empty_identity(student, rng):
    sub = student()
    x = randn(rng, 100, "float64", 10)
    state = reference.max_sum(x)
    assert_state(sub.merge(EMPTY, state), state, "merge((-inf, 0), s)", rng.seed)
    assert_state(sub.merge(state, EMPTY), state, "merge(s, (-inf, 0))", rng.seed)
    m, l = state_of(sub.merge(EMPTY, EMPTY), "merge((-inf, 0), (-inf, 0))")
    if not (m == float("-inf") and l == 0.0):
        raise CheckFailed(f"merge((-inf, 0), (-inf, 0)): expected (-inf, 0.0), got ({m!r}, {l!r})")

