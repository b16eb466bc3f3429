"""Checks for exercises/flash_decode.py (extension track; lesson: the Flash-Decoding paragraph,
"Same trick, opposite axis", and the merge rule from "Online softmax").

NumPy part (cpu, adversarial): merge_partials gets partial states (m, l, acc) that the grader
computes here, in float64, from fresh random scores and values split at random places; the answer
is softmax(s) @ v over all the keys.

Triton part (interp, adversarial): flash_decode runs under the interpreter on small caches. Every
input is rounded here to the dtype the kernel sees, so the float64 reference (computed here, from
the valid keys only) sees exactly the same numbers. What lies in the cache past seq_lens[b] and
behind each tensor is chosen by the check: NaN where the masks are the point (ragged_lengths),
garbage that would dominate the softmax where the -inf on padded scores is the point
(padded_keys_masked), zeros elsewhere, so each check fails for its own idea. Checks other than
gqa_heads use Hq = Hkv or Hkv = 1, where a wrong query-to-KV-head mapping cannot show.

gpu and perf: real sizes on CUDA; caches drawn by torch's generator in the worker and again here
(grader.judge.gpu.seeded_inputs), the reference computed here on the GPU in float32.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader import errors
from grader.judge import diagnose
from grader.judge.compare import CheckFailed, assert_close, assert_shape, values
from grader.judge.inputs import chunks, randn, round_to, tensor
from grader.exercises.flash_decode.rows import SIZE_OPS
from grader.judge.kernel_use import KERNELS as GATED
from grader.judge.kernel_use import assert_in_bounds, assert_kernel_computed
from grader.sandbox import sanitize

# Every flash_decode call goes through the kernel-use gate (grader.fixtures.Gated, kernel_use.KERNELS and
# SIZE_OPS there): a Triton launch, no computing torch op except the reductions a wrapper may run
# on seq_lens to choose its split count, and on CUDA no device kernel but the student's.
KERNELS = GATED["flash_decode"]["flash_decode"][1:]
CACHE_GUARD_ROWS = 128   # poison rows behind each cache: more than any tile can reach past L_max


# ------------------------------------------------------------------------------ references


def attention_rows(s: np.ndarray, v: np.ndarray) -> np.ndarray:
    """softmax(s) @ v for scores s (rows, n) and values v (n, D), float64; n = 0 gives 0."""
    if s.shape[-1] == 0:
        return np.zeros(s.shape[:-1] + v.shape[-1:])
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p @ v) / p.sum(-1, keepdims=True)


def decode_reference(q, k, v, seq_lens, interleaved: bool = False) -> np.ndarray:
    """q (B, Hq, D), k and v (B, Hkv, L_max, D): o (B, Hq, D) in float64 over each sequence's
    first seq_lens[b] keys, query head h reading KV head h // (Hq // Hkv) (with `interleaved`,
    the usual mistake: h % Hkv)."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    B, Hq, D = q.shape
    Hkv = k.shape[1]
    o = np.zeros((B, Hq, D))
    for b in range(B):
        n = int(seq_lens[b])
        for h in range(Hq):
            g = h % Hkv if interleaved else h // (Hq // Hkv)
            o[b, h] = attention_rows((q[b, h] @ k[b, g, :n].T / np.sqrt(D))[None], v[b, g, :n])[0]
    return o


def state_of(s: np.ndarray, v: np.ndarray):
    """The partial state (m, l, acc) of scores s (rows, n) over values v (n, D); n = 0 or a row
    of only -inf gives the empty state (-inf, 0, 0)."""
    rows, D = s.shape[0], v.shape[1]
    m = np.full(rows, -np.inf) if s.shape[1] == 0 else s.max(1)
    shift = np.where(np.isneginf(m), 0.0, m)
    e = np.exp(s - shift[:, None]) if s.shape[1] else np.zeros((rows, 0))
    return m, e.sum(1), e @ v if s.shape[1] else np.zeros((rows, D))


# ------------------------------------------------------------------------------ NumPy part


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
UNRESCALED_HINT = ("Your o equals sum(acc) / sum(l): the splits were added without rescaling. The "
                   "merge rule moves each state onto the common max first: l_a*exp(m_a - m) + "
                   "l_b*exp(m_b - m), and acc the same way.")


IDENTITY_HINT = ("merge_partials is right on the same splits without the empty state(s) "
                 "(-inf, 0, 0), and wrong with them: the empty state must be the identity of the "
                 "merge rule (exp(-inf) = 0 weight; shift by 0 where the max is -inf, never "
                 "-inf - (-inf)).")


def _is_empty(part) -> bool:
    m = np.asarray(part[0], dtype=np.float64)
    return bool(np.isneginf(m).all())


def _merge(sub, parts, expected, what, seed):
    got = sub.merge_partials(parts)
    try:
        assert_close(got, expected, what=what, dtype="float64", seed=seed)
    except CheckFailed as e:
        failure = _diagnose(got, expected, e, EMPTY_NAN_HINT, [(_unrescaled(parts), UNRESCALED_HINT)])
        kept = [p for p in parts if not _is_empty(p)]
        if not failure.hint and kept and len(kept) < len(parts):
            # the evidence: the same call without the empty states (a control, in this check)
            try:
                assert_close(sub.merge_partials(kept), expected, what=what, dtype="float64")
                failure = CheckFailed(str(e), hint=IDENTITY_HINT)
            except (CheckFailed, errors.StudentRaised, errors.BadReturn):
                pass
        raise failure from None


def _unrescaled(parts):
    """What merging without rescaling gives: sum of acc / sum of l."""
    with np.errstate(all="ignore"):
        l = sum(np.asarray(p[1], dtype=np.float64) for p in parts)
        acc = sum(np.asarray(p[2], dtype=np.float64) for p in parts)
        return acc / np.asarray(l)[..., None]


@pytest.mark.check("flash_decode.merge_matches_one_pass")
def test_merge_matches_one_pass(student, rng):
    sub = student()
    for scale in (1, 10, 100):
        rows, n, D = 3, 500, int(rng.choice([32, 64]))
        s = randn(rng, (rows, n), "float64", scale)
        v = randn(rng, (n, D), "float64")
        expected = attention_rows(s, v)
        parts = [state_of(s[:, c], v[c]) for c in chunks(rng, n, 7)]
        orders = {"left to right": parts, "shuffled": [parts[i] for i in rng.permutation(7)],
                  "right to left": parts[::-1]}
        for name, order in orders.items():
            _merge(sub, order, expected, f"merge_partials of 7 uneven splits, {name} "
                   f"(rows={rows}, D={D}, scores * {scale})", rng.seed)
        # one row, as plain floats m, l and an acc of shape (D,)
        one = [(float(m[0]), float(l[0]), acc[0]) for m, l, acc in parts]
        _merge(sub, one, expected[0], f"merge_partials of 7 splits of one row, m and l floats, "
               f"acc (D,) (scores * {scale})", rng.seed)


@pytest.mark.check("flash_decode.merge_empty_split")
def test_merge_empty_split(student, rng):
    sub = student()
    rows, n, D = 3, 200, 32
    s = randn(rng, (rows, n), "float64", 10)
    v = randn(rng, (n, D), "float64")
    parts = [state_of(s[:, c], v[c]) for c in chunks(rng, n, 3)]
    empty = (np.full(rows, -np.inf), np.zeros(rows), np.zeros((rows, D)))
    expected = attention_rows(s, v)
    for where, order in (("first", [empty, *parts]), ("in the middle", [parts[0], empty, *parts[1:]]),
                         ("last", [*parts, empty]), ("twice, first", [empty, empty, *parts])):
        _merge(sub, order, expected, f"merge_partials with an empty split {where}", rng.seed)
    # row 1 has no keys in the first split only (a shorter sequence): masked as -inf there
    masked = s.copy()
    masked[1, :80] = -np.inf
    mixed = [state_of(masked[:, :80], v[:80]), state_of(masked[:, 80:], v[80:])]
    _merge(sub, mixed, attention_rows(masked, v), "merge_partials where row 1's first split "
           "holds no keys", rng.seed)
    # a row with no keys in any split (a sequence of length 0): o = 0, as documented
    s0 = s.copy()
    s0[2] = -np.inf
    none = [state_of(s0[:, c], v[c]) for c in chunks(rng, n, 3)]
    want = attention_rows(s0[:2], v)
    _merge(sub, none, np.vstack([want, np.zeros((1, D))]),
           "merge_partials where row 2 has no keys in any split (o must be 0 there)", rng.seed)
    _merge(sub, [(-np.inf, 0.0, np.zeros(D))] * 2, np.zeros(D),
           "merge_partials of two empty states of one row (o must be 0)", rng.seed)


# ------------------------------------------------------------------------------ Triton part


def assert_kernels(extras: dict, call: str) -> None:
    """kernel_use's rule, except for the size reductions a wrapper may run on seq_lens."""
    assert_kernel_computed(extras, call, *KERNELS, allowed=SIZE_OPS)


def _inputs(rng, B, Hq, Hkv, L, D, dtype="float16", scale=1.0):
    q = randn(rng, (B, Hq, D), dtype, scale)
    k = randn(rng, (B, Hkv, L, D), dtype, scale)
    v = randn(rng, (B, Hkv, L, D), dtype)
    return q, k, v


def _fill_past(k, v, seq_lens, k_fill, v_fill):
    """Cache positions past seq_lens[b] set to the given values (arrays broadcast or floats)."""
    k, v = k.copy(), v.copy()
    for b, n in enumerate(seq_lens):
        k[b, :, n:] = k_fill if np.isscalar(k_fill) else k_fill[b]
        v[b, :, n:] = v_fill
    return k, v


BOUNDS_HINTS = {
    "tl.load": "Mask every K and V load on cols < seq_len (and the q load on the head rows that "
               "exist): a load without mask= reads past the end of the cache even when tl.where "
               "sets those scores to -inf afterwards.",
    "tl.store": "Mask the stores of the partial states and of o on the rows that exist (the "
                "query tile is padded to 16 rows).",
}


def _decode(sub, q, k, v, seq_lens, *, dtype="float16", num_splits=None, guard_poison=0.0,
            case="", seed=None, nan_hint="", twins=(), bounds=False, split_hint=""):
    """flash_decode on these inputs (poison `guard_poison` behind each cache), checked in full
    against the float64 reference; twins: (answer of a known mistake, hint) pairs; split_hint:
    the hint when the same inputs with num_splits=1 (a control call) give the right answer."""
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
    r = sub.call("flash_decode", *args, **({} if num_splits is None else {"num_splits": num_splits}))
    out = r.value
    if bounds:   # the lanes the bounds hooks switched off (grader/worker/bounds.py), judged here
        assert_in_bounds(r.extras, ["q", "k_cache", "v_cache", "seq_lens"], f"{what} ({context})",
                         BOUNDS_HINTS)
    expected = decode_reference(q, k, v, lens)
    try:
        assert_close(out, expected, what=what, dtype=dtype, case=context, seed=seed)
    except CheckFailed as e:
        failure = _diagnose(out, expected, e, nan_hint, twins)
        g = np.asarray(values(out), dtype=np.float64)
        if g.shape == expected.shape and (np.isinf(g) & np.isfinite(expected)).any():
            # inf where the answer is finite: something overflowed, large_scores' idea
            raise CheckFailed(str(e), hint=failure.hint or OVERFLOW_HINT,
                              follows=("flash_decode.large_scores",)) from None
        if not failure.hint and split_hint and num_splits not in (None, 1):
            args[3] = tensor(lens, "int32", poison=0.0)
            try:
                one = sub.call("flash_decode", *args, num_splits=1).value
                assert_close(one, expected, what=what, dtype=dtype)
                failure = CheckFailed(str(e), hint=split_hint.format(splits=num_splits))
            except (CheckFailed, errors.StudentRaised, errors.BadReturn):
                pass
        raise failure from None
    return out


OVERFLOW_HINT = ("inf in the output where the answer is finite: something overflowed. exp(s) "
                 "without the running max does (float32 past 88.7, and p cast to float16 for "
                 "tl.dot past 65504): p = exp(s - m_new) in every split.")
SPLIT_NAN_HINT = ("nan in the output: a split that holds no keys must hand back the empty state "
                  "(-inf, 0, 0) (its loop should not run: hi = min(lo + split_size, seq_len)), and "
                  "the merge must never compute -inf - (-inf) (shift by 0 where the max is -inf).")
MASK_NAN_HINT = ("nan in the output, and the cache holds NaN past seq_lens[b] here: a K or V load "
                 "read past the sequence's end. Mask the loads on cols < seq_len (not L_max), and "
                 "let no split run past seq_len.")


@pytest.mark.check("flash_decode.matches_reference")
def test_matches_reference(student, rng):
    sub = student()
    cases = [  # B, Hq, Hkv, L_max, D, dtype, num_splits; every sequence uses its whole cache
        (2, 2, 2, 96, 64, "float16", 3),
        (1, 4, 1, 64, 128, "float16", None),     # one KV head for all query heads (MQA)
        (3, 1, 1, 70, 64, "float16", 2),
        (2, 2, 2, 50, 64, "float32", 2),
    ]
    for B, Hq, Hkv, L, D, dtype, splits in cases:
        q, k, v = _inputs(rng, B, Hq, Hkv, L, D, dtype)
        _decode(sub, q, k, v, [L] * B, dtype=dtype, num_splits=splits, seed=rng.seed)


@pytest.mark.check("flash_decode.ragged_lengths")
def test_ragged_lengths(student, rng):
    sub = student()
    # NaN in every cache position past seq_lens[b] and behind the caches: a K or V load that is
    # not masked on cols < seq_len, or a split that runs past it, turns into nan
    cases = [  # B, Hq, Hkv, L_max, D, seq_lens, num_splits
        (4, 2, 2, 150, 64, None, 3),
        (3, 2, 2, 100, 128, [1, 100, 51], None),
        (2, 3, 1, 97, 64, [17, 97], 4),
    ]
    # The last sequence ends at L_max (150, 97: no multiple of any block) in two cases, so a K or
    # V load without its mask reads past the end of the cache there, and the bounds hooks record
    # it deterministically (inside the cache, past seq_lens[b], the NaN shows it)
    for B, Hq, Hkv, L, D, lens, splits in cases:
        if lens is None:   # 1, two lengths that are no multiple of 16, and L_max last
            lens = [1, *(int(rng.integers(2, L // 16)) * 16 + int(rng.integers(1, 16))
                         for _ in range(B - 2)), L]
        q, k, v = _inputs(rng, B, Hq, Hkv, L, D)
        k, v = _fill_past(k, v, lens, np.nan, np.nan)
        _decode(sub, q, k, v, lens, num_splits=splits, guard_poison=np.nan, seed=rng.seed,
                case="NaN past seq_lens[b] and behind the caches", nan_hint=MASK_NAN_HINT,
                bounds=True)


@pytest.mark.check("flash_decode.gqa_heads")
def test_gqa_heads(student, rng):
    sub = student()
    cases = [(2, 8, 2, 40, 64), (1, 6, 3, 33, 64), (1, 12, 4, 20, 128)]   # groups of 4, 2, 3
    for B, Hq, Hkv, L, D in cases:
        q, k, v = _inputs(rng, B, Hq, Hkv, L, D)
        lens = [L] * B
        hint = (f"Your output is what query head h gets from KV head h % Hkv. The heads of one "
                f"group are consecutive: head h reads KV head h // (Hq // Hkv), here h // "
                f"{Hq // Hkv}.")
        _decode(sub, q, k, v, lens, num_splits=2, seed=rng.seed,
                case=f"groups of {Hq // Hkv} query heads per KV head",
                twins=[(decode_reference(q, k, v, lens, interleaved=True), hint)])


@pytest.mark.check("flash_decode.empty_splits")
def test_empty_splits(student, rng):
    sub = student()
    # Many splits for short sequences: every split past seq_len holds no keys, and the last
    # sequence of the first case has length 0 (its output is 0). Each length fits in the
    # shortest first split any split size allows (cdiv(L_max, num_splits) keys), so only the
    # empty states are new here; zeros past seq_lens, so only the nan matters.
    for B, Hq, Hkv, L, D, splits in ((3, 2, 2, 256, 64, 8), (2, 1, 1, 128, 64, 16)):
        first = -(-L // splits)
        lens = [1, int(rng.integers(2, first + 1)), 0][:B] if B == 3 else \
            [int(rng.integers(2, first + 1)), first]
        q, k, v = _inputs(rng, B, Hq, Hkv, L, D)
        k, v = _fill_past(k, v, lens, 0.0, 0.0)
        _decode(sub, q, k, v, lens, num_splits=splits, seed=rng.seed, nan_hint=SPLIT_NAN_HINT,
                case=f"{splits} splits: most hold no keys", split_hint=(
                    "Right with num_splits=1 on the same inputs, wrong with {splits} splits, most "
                    "of which hold no keys: a split past seq_len must hand back the empty state "
                    "(-inf, 0, 0) (its loop should not run: hi = min(lo + split_size, seq_len)), "
                    "and the merge must treat the empty state as the identity."))


@pytest.mark.check("flash_decode.padded_keys_masked")
def test_padded_keys_masked(student, rng):
    sub = student()
    # Every real score is negative (q > 0 > k), so a padded key loaded as zeros scores 0, above
    # all of them, and without the -inf it takes most of the weight. The garbage past seq_lens
    # is a key along q (a huge score) with values of 100: any weight on it shows. One split, so
    # nothing here depends on the merge.
    for B, Hq, Hkv, L, D, lens in ((2, 2, 2, 100, 64, [17, 70]), (3, 1, 1, 64, 128, [1, 33, 50])):
        q = round_to(np.abs(rng.standard_normal((B, Hq, D))) + 0.5, "float16")
        k = round_to(-np.abs(rng.standard_normal((B, Hkv, L, D))) - 0.5, "float16")
        v = randn(rng, (B, Hkv, L, D), "float16")
        garbage = round_to(np.broadcast_to(q[:, :1, None, :] * 4, (B, Hkv, L, D)), "float16")
        k, v = _fill_past(k, v, lens, garbage[:, :, :1], 100.0)
        _decode(sub, q, k, v, lens, num_splits=1, seed=rng.seed,
                case="all real scores < 0; garbage past seq_lens would score ~+100",
                twins=[(_padded_zero(q, k, v, lens, block), PADDED_HINT.format(block=block))
                       for block in (16, 32, 64, 128)])


PADDED_HINT = ("Your o equals attention with the keys past seq_lens[b], up to the next multiple "
               "of {block}, scored 0 with value 0 (masked loads, other=0): the loads are masked, "
               "but those scores must be -inf too, s = tl.where(valid, s, float('-inf')), or "
               "exp gives them weight.")


def _padded_zero(q, k, v, seq_lens, block: int) -> np.ndarray:
    """decode_reference plus, per sequence, keys of score 0 and value 0 up to a multiple of block."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    B, Hq, D = q.shape
    Hkv = k.shape[1]
    o = np.zeros((B, Hq, D))
    for b in range(B):
        n = int(seq_lens[b])
        pad = -(-n // block) * block - n
        for h in range(Hq):
            g = h // (Hq // Hkv)
            s = (q[b, h] @ k[b, g, :n].T / np.sqrt(D))[None]
            o[b, h] = diagnose.attend(s, v[b, g, :n], pad=pad)[0]
    return o


@pytest.mark.check("flash_decode.max_in_last_split")
def test_max_in_last_split(student, rng):
    sub = student()
    # coordinate 0 adds 8 * 8 / sqrt(64) = 8 to the scores of the last 4 keys only: the max
    # sits in the last split, and every earlier split's l and acc must shrink by ~e^-8 in the
    # merge (and, within the last split, by alpha). Full lengths: no split is empty here.
    for B, Hq, Hkv, L, D, splits in ((2, 2, 2, 200, 64, 4), (1, 1, 1, 256, 64, 8)):
        q, k, v = _inputs(rng, B, Hq, Hkv, L, D)
        q[..., 0] = 8.0
        k[..., 0] = 0.0
        k[..., L - 4:, 0] = 8.0
        _decode(sub, q, k, v, [L] * B, num_splits=splits, seed=rng.seed,
                case="the max scores are the last 4 keys", split_hint=(
                    "Right with num_splits=1 on the same inputs, wrong with {splits} splits where "
                    "the max sits in the last one: the merge must rescale each split onto the "
                    "common max, l_s * exp(m_s - m) and acc_s * exp(m_s - m), before adding."))


@pytest.mark.check("flash_decode.large_scores")
def test_large_scores(student, rng):
    sub = student()
    # q, k ~ 10 * randn, D = 64: scores ~ +-100, row maxima ~ 250, past float32 exp's overflow
    # at 88.7: exp(s) without the running max is inf, and inf / inf is nan
    B, Hq, Hkv, L, D = 2, 2, 2, 96, 64
    q, k, v = _inputs(rng, B, Hq, Hkv, L, D, scale=10.0)
    _decode(sub, q, k, v, [L, L], num_splits=3, seed=rng.seed,
            case="q, k scaled by 10: scores up to ~300",
            nan_hint="nan with scores up to ~300: exp(s) overflows float32 past 88.7 and inf / inf "
                     "is nan. Subtract the running max in every split: p = exp(s - m_new).")


@pytest.mark.check("flash_decode.uses_kernel")
def test_uses_kernel(student, rng):
    sub = student()
    q, k, v = _inputs(rng, 2, 2, 2, 40, 64)
    r = sub.call("flash_decode", *(tensor(t, "float16") for t in (q, k, v)),
                 tensor(np.array([40, 23], np.int32), "int32", poison=0.0), opts={"trace": True})
    assert_kernels(r.extras, "flash_decode(q, k_cache, v_cache, seq_lens)")
    # the values are the other checks' business; here only that a tensor came back
    assert_shape(r.value, q.shape, what="flash_decode(q, k_cache, v_cache, seq_lens)",
                 dtype="float16")


# ------------------------------------------------------------------------------- gpu, perf

# (B, Hq, Hkv, L_max, D, dtype): B from 1 to 16, MHA, GQA and MQA, ragged L_max, D 64 and 128
GPU_CASES = ((1, 32, 8, 32768, 128, "float16"), (16, 32, 8, 4097, 128, "bfloat16"),
             (4, 16, 16, 8191, 64, "float16"), (8, 32, 4, 2000, 128, "bfloat16"),
             (2, 8, 1, 777, 64, "float16"), (3, 4, 2, 1, 128, "float16"))


def gpu_decode_reference(q, k, v, seq_lens):
    """flash_decode's answer in float32 on the GPU, one sequence at a time; the query heads of
    a group are matched to their KV head by a view, so no cache is copied per query head."""
    import torch

    B, Hq, D = q.shape
    Hkv = k.shape[1]
    group = Hq // Hkv
    out = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        qq = q[b].float().reshape(Hkv, group, D)
        kk, vv = k[b, :, :n].float(), v[b, :, :n].float()              # (Hkv, n, D)
        s = torch.matmul(qq, kk.transpose(1, 2)) * D ** -0.5             # (Hkv, group, n)
        out[b] = torch.matmul(torch.softmax(s, dim=-1), vv).reshape(Hq, D)
        del kk, vv, s
    return out


def _gpu_lens(rng, B, L):
    lens = rng.integers(1, L + 1, size=B)
    lens[0] = L
    if B > 2:
        lens[-1] = 1
    return lens.astype(np.int32)


@pytest.mark.check("flash_decode.gpu_real_sizes")
def test_gpu_real_sizes(student, rng, gpu):
    import torch

    from grader.judge import gpu as g

    sub = student()
    for B, Hq, Hkv, L, D, dtype in GPU_CASES:
        lens = _gpu_lens(rng, B, L)
        case = f"{dtype} B={B}, Hq={Hq}, Hkv={Hkv}, L_max={L}, D={D}, seq_lens={lens.tolist()[:6]}"
        (mq,), (q,) = g.seeded_inputs(rng, (B, Hq, D), dtype, count=1)
        mkv, (k, v) = g.seeded_inputs(rng, (B, Hkv, L, D), dtype, count=2,
                                      guard=CACHE_GUARD_ROWS * D)
        r = sub.call("flash_decode", mq, *mkv, tensor(lens, "int32", device="cuda", poison=0.0),
                     opts={"poison_empty": True, "sync": True, "trace": True})
        assert_kernels(r.extras, f"flash_decode ({case})")
        g.assert_close_gpu(r.value, gpu_decode_reference(q, k, v, torch.from_numpy(lens)),
                           what="flash_decode(q, k_cache, v_cache, seq_lens)", dtype=dtype,
                           case=case, seed=rng.seed)
        del q, k, v


def _sanitizer_call(sub, device: str) -> None:
    """GQA (4 query heads per KV head), one ragged and one full sequence: the last sequence ends
    at L_max = 1000, not a multiple of any block, so an unmasked K or V load of the last KV head
    leaves the allocation (--padding makes that an error)."""
    import torch

    from grader.judge.inputs import seeded, torch_randn

    lens = [333, 1000]
    shapes = [(2, 8, 64), (2, 2, 1000, 64), (2, 2, 1000, 64)]
    seeds = [int(x) for x in np.random.default_rng().integers(0, 2**31 - 1, size=3)]
    markers = [seeded(sh, "float16", device, s) for sh, s in zip(shapes, seeds)]
    got = sanitize.gated_call(sub, "flash_decode", "flash_decode", *markers,
                              tensor(np.array(lens, np.int32), "int32", device=device, poison=0.0))
    q, k, v = (torch_randn(sh, "float16", device, s).float() for sh, s in zip(shapes, seeds))
    want = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    for b, n in enumerate(lens):
        kk = k[b, :, :n].repeat_interleave(4, dim=0)            # query head h reads KV head h // 4
        vv = v[b, :, :n].repeat_interleave(4, dim=0)
        s = torch.einsum("hd,hnd->hn", q[b], kk) * 64 ** -0.5
        want[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, dim=-1), vv)
    if not sanitize.close_enough(got, want):
        raise sanitize.wrong_answer("flash_decode", "flash_decode", SANITIZER_TARGET)


SANITIZER_TARGET = sanitize.Target("q (2, 8, 64), k_cache and v_cache (2, 2, 1000, 64) float16, "
                                   "seq_lens [333, 1000]", _sanitizer_call)


@pytest.mark.check("flash_decode.sanitizer")
def test_sanitizer(student, gpu):
    if sanitize.sanitizer_path() is None:
        pytest.skip("compute-sanitizer is not installed on this machine (it comes with the CUDA toolkit)")
    sanitize.memcheck(student().directory, "flash_decode")


PERF_B, PERF_HQ, PERF_D = 8, 32, 128
PERF_CASES = ((32, 32768), (8, 32768), (32, 131072), (8, 131072))   # (Hkv, L)
SPEEDUP_CASE = (1, 32, 8, 131072, 128)                              # B, Hq, Hkv, L, D
FULL_FRACTION, ZERO_FRACTION = 0.6, 0.15       # of the copy bandwidth measured in this run
FULL_SPEEDUP, ZERO_SPEEDUP = 4.0, 1.0          # num_splits=None over num_splits=1
# Reading alone outruns a read-plus-write copy (SDPA's cuDNN reads at 1.05-1.07 of the copy
# bandwidth on the H200, issue 13): the roofline floor for reading K and V is their bytes at
# READ_OVER_COPY times the measured copy bandwidth (below_floor adds 10% to spare).
READ_OVER_COPY = 1.25


def _decode_inputs(rng, B, Hq, Hkv, L, D):
    """Markers for the worker (q, k_cache, v_cache drawn there, seq_lens = L everywhere) and the
    same tensors here on the GPU."""
    from grader.judge import gpu as g

    (mq,), (q,) = g.seeded_inputs(rng, (B, Hq, D), "float16", count=1)
    mkv, (k, v) = g.seeded_inputs(rng, (B, Hkv, L, D), "float16", count=2)
    lens = np.full(B, L, np.int32)
    markers = [mq, *mkv, tensor(lens, "int32", device="cuda", poison=0.0)]
    return markers, [q, k, v, lens]


def _decode_requests(sub, rng, markers, tensors, what, **kwargs):
    """The student's flash_decode as timed requests (grader.judge.timing.Requests): q refilled
    from a fresh seed before every call, every call's output reduced to a checksum, checked
    afterwards against the reference at the same q (and the last output at random in full)."""
    from grader.judge import timing

    return timing.Requests(sub, "flash_decode", markers, kwargs=kwargs, rng=rng, inputs=tensors,
                           dtype="float16", what=what,
                           reference=lambda i: gpu_decode_reference(*i))


def _checked_once(sub, rng, markers, tensors, what, case, **kwargs):
    """One gated call (traced and profiled: only the student's Triton kernels and copies run)
    whose output is checked in full before anything is timed."""
    from grader.judge import gpu as g

    r = sub.call("flash_decode", *markers, opts={"sync": True}, **kwargs)
    g.assert_close_gpu(r.value, gpu_decode_reference(*tensors), what=what, dtype="float16",
                       case=case, seed=rng.seed)
    # the gate's profiler (CUPTI) stays attached to the process it ran in and slows every later
    # launch there: what is timed next runs in a fresh worker
    sub.close()


def _harness_ms(workers, rng, what) -> tuple[float, str]:
    """The per-call cost of the timing harness (q refilled before, a checksum after), measured
    here on trusted code with nothing of the student's alive (timing.quiet_gpu); the student
    cannot skip it, since every timed output is verified."""
    import torch

    from grader.judge import timing

    note = timing.quiet_gpu(workers, what)
    q = torch.empty((PERF_B, PERF_HQ, PERF_D), dtype=torch.float16, device="cuda")
    harness = timing.per_call_ms(timing.local_request(lambda t: t, [q]))
    if not (harness == harness and 0 <= harness < 1e3):   # fail closed: no baseline, no credit
        raise CheckFailed(f"{what}: the timing harness measured {harness} ms per call here, so "
                          f"no time can be judged; no bandwidth points")
    return harness, note


@pytest.mark.check("flash_decode.bandwidth")
def test_bandwidth(student, rng, gpu, credit, workers):
    import torch

    from grader.judge import timing
    from grader.judge.devices import linear_credit

    what = "flash_decode.bandwidth"
    harness, note = _harness_ms(workers, rng, what)
    copy = gpu.ceiling("copy_gbs")   # measured once per run, with no student process alive
    if not (copy == copy and copy > 0):
        raise CheckFailed(f"{what}: no copy bandwidth was measured on this GPU; no bandwidth points")
    sub = student()
    fractions, lines = [], []
    for Hkv, L in PERF_CASES:
        case = f"B={PERF_B}, Hq={PERF_HQ}, Hkv={Hkv}, L={L}, D={PERF_D}, float16"
        call = f"flash_decode(q, k_cache, v_cache, seq_lens) at {case}"
        markers, tensors = _decode_inputs(rng, PERF_B, PERF_HQ, Hkv, L, PERF_D)
        _checked_once(sub, rng, markers, tensors, "flash_decode(q, k_cache, v_cache, seq_lens)", case)
        reqs = _decode_requests(sub, rng, markers, tensors, call)
        ms = timing.per_call_ms(reqs)
        reqs.verify()
        del tensors, reqs
        torch.cuda.empty_cache()
        ms -= harness
        nbytes = 2 * PERF_B * Hkv * L * PERF_D * 2       # K and V, fp16, each read once
        impossible = timing.below_floor(ms, nbytes / (READ_OVER_COPY * copy) / 1e6, call)
        if impossible:
            raise CheckFailed(impossible)
        gbs = nbytes / ms / 1e6
        fractions.append(linear_credit(gbs / copy, FULL_FRACTION, ZERO_FRACTION))
        lines.append(f"Hkv={Hkv}, L={L}: {ms:.3f} ms = {gbs:.0f} GB/s = {gbs / copy:.2f} of copy")
    credit.set(sum(fractions) / len(fractions),
               f"B={PERF_B}, Hq={PERF_HQ}, D={PERF_D}, float16: " + "; ".join(lines)
               + f". Bytes = 2 * B * Hkv * L * D * 2 (K and V read once); copy bandwidth measured "
               f"in this run: {copy:.0f} GB/s; full marks from {FULL_FRACTION:g} of it, none "
               f"below {ZERO_FRACTION:g}; every timed call's output checked (per call, "
               f"{harness:.3f} ms of refill and checksum taken out){note}")


@pytest.mark.check("flash_decode.splits_speedup")
def test_splits_speedup(student, rng, gpu, credit, workers):
    from grader.judge import timing
    from grader.judge.devices import linear_credit

    what = "flash_decode.splits_speedup"
    harness, note = _harness_ms(workers, rng, what)
    copy = gpu.ceiling("copy_gbs")
    sub = student()
    B, Hq, Hkv, L, D = SPEEDUP_CASE
    case = f"B={B}, Hq={Hq}, Hkv={Hkv}, L={L}, D={D}, float16"
    markers, tensors = _decode_inputs(rng, B, Hq, Hkv, L, D)
    times = {}
    for label, kwargs in (("num_splits=None", {}), ("num_splits=1", {"num_splits": 1})):
        call = f"flash_decode(q, k_cache, v_cache, seq_lens, {label}) at {case}"
        # correctness first, at this very size, with each split count
        _checked_once(sub, rng, markers, tensors, call, case, **kwargs)
        reqs = _decode_requests(sub, rng, markers, tensors, call, **kwargs)
        ms = timing.per_call_ms(reqs) - harness
        reqs.verify()
        if copy == copy and copy > 0:
            nbytes = 2 * B * Hkv * L * D * 2
            impossible = timing.below_floor(ms, nbytes / (READ_OVER_COPY * copy) / 1e6, call)
            if impossible:
                raise CheckFailed(impossible)
        elif ms <= 0:
            raise CheckFailed(f"{call}: {ms:.4f} ms per call, impossible; no speed-up points")
        times[label] = ms
    split, one = times["num_splits=None"], times["num_splits=1"]
    speedup = one / split
    credit.set(linear_credit(speedup, FULL_SPEEDUP, ZERO_SPEEDUP),
               f"{case}: num_splits=None {split:.3f} ms, num_splits=1 {one:.3f} ms: {speedup:.1f}x "
               f"(full marks from {FULL_SPEEDUP:g}x); every timed call's output checked (per "
               f"call, {harness:.3f} ms of refill and checksum taken out){note}")
