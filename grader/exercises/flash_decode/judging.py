"""How flash_decode's checks judge a call, shared by its check modules and its hidden checks:
the kernel-use rule, the merge and decode assertions, and the hints their evidence supports.

assert_merge and assert_decode compare the whole answer with the float64 reference
(reference.py) and, on a failure, hand back the hint its evidence shows: nan where the answer is
a number, an output equal to a known mistake's answer (a wrong twin), or a control call (the same
inputs without the empty states, or with num_splits=1) that comes out right.
"""

from __future__ import annotations

import numpy as np

from grader import errors
from grader.exercises.flash_decode.reference import (CACHE_GUARD_ROWS, decode_reference,
                                                     decode_same_precision)
from grader.exercises.flash_decode import mistakes
from grader.judge.answers.compare import TOLERANCES, CheckFailed, assert_close, values
from grader.judge.answers.inputs import tensor
from grader.judge.evidence.kernel_use import assert_in_bounds


def _diagnose(got, expected, error: CheckFailed, nan_hint: str, twins) -> CheckFailed:
    """The failure with the hint its evidence supports: nan where the reference has a number, or
    an output that equals a known mistake's answer (a wrong twin), else the registry's hint."""
    g = np.asarray(values(got), dtype=np.float64)
    if g.shape == np.shape(expected):
        if nan_hint and np.isnan(g).any():
            return CheckFailed(str(error), hint=nan_hint)
        for twin, hint in twins:
            if np.allclose(g, twin, rtol=1e-2, atol=1e-2):
                return CheckFailed(str(error), hint=hint)
    return CheckFailed(str(error))


EMPTY_NAN_HINT = ("nan where the reference has a number: an empty state (-inf, 0, 0) went "
                  "through exp(-inf - (-inf)). The empty state is the identity: shift by 0 where "
                  "the max is -inf.")
IDENTITY_HINT = ("merge_partials is right on the same splits without the empty state(s) "
                 "(-inf, 0, 0), and wrong with them: the empty state must be the identity of the "
                 "merge rule (exp(-inf) = 0 weight; shift by 0 where the max is -inf, never "
                 "-inf - (-inf)).")


def _is_empty(part) -> bool:
    m = np.asarray(part[0], dtype=np.float64)
    return bool(np.isneginf(m).all())


def assert_merge(sub, parts, expected, what, seed):
    """merge_partials(parts) checked in full against `expected` (float64); on a failure, the
    hint of nan, of unrescaled splits, or of a control call without the empty states."""
    got = sub.merge_partials(parts)
    try:
        assert_close(got, expected, what=what, dtype="float64", seed=seed)
    except CheckFailed as e:
        failure = _diagnose(got, expected, e, EMPTY_NAN_HINT,
                            [(mistakes.unrescaled_merge(parts), mistakes.UNRESCALED_HINT)])
        kept = [p for p in parts if not _is_empty(p)]
        if not failure.hint and kept and len(kept) < len(parts):
            # the evidence: the same call without the empty states (a control, in this check)
            try:
                assert_close(sub.merge_partials(kept), expected, what=what, dtype="float64")
                failure = CheckFailed(str(e), hint=IDENTITY_HINT)
            except (CheckFailed, errors.StudentRaised, errors.BadReturn):
                pass
        raise failure from None


BOUNDS_HINTS = {
    "tl.load": "Mask every K and V load on cols < seq_len (and the q load on the head rows that "
               "exist): a load without mask= reads past the end of the cache even when tl.where "
               "sets those scores to -inf afterwards.",
    "tl.store": "Mask the stores of the partial states and of o on the rows that exist (the "
                "query tile is padded to 16 rows).",
}


def assert_decode(sub, q, k, v, seq_lens, *, dtype="float16", num_splits=None, guard_poison=0.0,
                  case="", seed=None, nan_hint="", twins=(), bounds=False, split_hint="",
                  floor=None):
    """flash_decode on these inputs (poison `guard_poison` behind each cache), checked in full
    against the float64 reference within a multiple of plain PyTorch's error in `dtype` plus a
    floor (compare.assert_close's `baseline`; `floor` None: the dtype's); twins: (answer of a
    known mistake, hint) pairs; split_hint: the hint when the same inputs with num_splits=1 (a
    control call) give the right answer."""
    B, Hq, D = q.shape
    Hkv, L = k.shape[1], k.shape[2]
    lens = np.asarray(seq_lens, dtype=np.int32)
    args = [tensor(q, dtype, guard=D, poison=guard_poison),
            *(tensor(t, dtype, guard=CACHE_GUARD_ROWS * D, poison=guard_poison) for t in (k, v)),
            tensor(lens, "int32", poison=0.0)]
    what = "flash_decode(q, k_cache, v_cache, seq_lens" + (
        f", num_splits={num_splits})" if num_splits is not None else ")")
    context = (f"B={B}, Hq={Hq}, Hkv={Hkv}, L_max={L}, D={D}, seq_lens={lens.tolist()}, {dtype}"
               + (f", {case}" if case else ""))
    # torch.empty in the worker returns NaN (poison_empty): a partial state a split does not
    # store is garbage that shows, not zeros that happen to merge right
    r = sub.call("flash_decode", *args, **({} if num_splits is None else {"num_splits": num_splits}),
                 opts={"poison_empty": True})
    out = r.value
    if bounds:   # the lanes the bounds hooks switched off (grader/worker/bounds.py), judged here
        assert_in_bounds(r, ["q", "k_cache", "v_cache", "seq_lens"], f"{what} ({context})",
                         BOUNDS_HINTS)
    expected = decode_reference(q, k, v, lens)
    # flash-attention's rule: within a multiple of plain PyTorch's error in `dtype` on these
    # inputs (compare.BASELINE_MULT), so a correct kernel's rounding never flips the verdict
    rule = dict(baseline=decode_same_precision(q, k, v, lens, dtype), floor=floor)
    try:
        assert_close(out, expected, what=what, dtype=dtype, case=context, seed=seed, **rule)
    except CheckFailed as e:
        failure = _diagnose(out, expected, e, nan_hint, twins)
        known = None if failure.hint else mistakes.match(out, q, k, v, lens, num_splits,
                                                         *TOLERANCES[dtype])
        if known:   # follows: the check aimed at a mistake every case shows leads
            failure = CheckFailed(str(e), hint=known[0], follows=known[1])
        g = np.asarray(values(out), dtype=np.float64)
        garbage = mistakes.empty_garbage_hint(out, expected, q, k, lens, num_splits)
        if garbage and failure.hint in ("", nan_hint) and (not failure.hint or _right_with_one_split(
                sub, args, lens, expected, rule, what, dtype)):
            # nan or inf with nothing to overflow, some splits empty, and (when the case's own
            # nan hint fired) right with one split: the empty splits' state, not the loads
            failure = CheckFailed(str(e), hint=garbage, follows=("flash_decode.empty_splits",))
        elif not failure.hint and g.shape == expected.shape and (
                np.isinf(g) & np.isfinite(expected)).any():
            # inf where the answer is finite, with scores that can overflow: large_scores' idea
            raise CheckFailed(str(e), hint=OVERFLOW_HINT,
                              follows=("flash_decode.large_scores",)) from None
        if not failure.hint and split_hint and num_splits not in (None, 1) and \
                _right_with_one_split(sub, args, lens, expected, rule, what, dtype):
            failure = CheckFailed(str(e), hint=split_hint.format(splits=num_splits))
        if not failure.hint:
            atol, rtol = TOLERANCES[dtype]
            failure = CheckFailed(str(e), hint=mistakes.what_differs(out, expected, lens, atol, rtol))
        raise failure from None
    return out


def _right_with_one_split(sub, args, lens, expected, rule, what, dtype) -> bool:
    """The control call: the same inputs with num_splits=1 give the right answer."""
    args = [*args[:3], tensor(lens, "int32", poison=0.0)]
    try:
        one = sub.call("flash_decode", *args, num_splits=1, opts={"poison_empty": True}).value
        assert_close(one, expected, what=what, dtype=dtype, **rule)
        return True
    except (CheckFailed, errors.StudentRaised, errors.BadReturn):
        return False


OVERFLOW_HINT = ("inf in the output where the answer is finite: something overflowed. exp(s) "
                 "without the running max does (float32 past 88.7, and p cast to float16 for "
                 "tl.dot past 65504): p = exp(s - m_new) in every split.")
