"""flash_decode's adversarial checks (Break It cases): empty states in merge_partials, and, under
the Triton interpreter, splits with no keys, garbage past seq_lens[b], the max in the last split,
scores past exp's range, and the kernel-use gate.

What lies in the cache past seq_lens[b] and behind each tensor is chosen by the check: garbage
that would dominate the softmax where the -inf on padded scores is the point
(padded_keys_masked), zeros elsewhere, so each check fails for its own idea. These checks use
Hq = Hkv or Hkv = 1, where a wrong query-to-KV-head mapping cannot show (gqa_heads' idea).
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.exercises.flash_decode.judging import assert_decode, assert_merge
from grader.exercises.flash_decode.reference import (attention_rows, decode_inputs,
                                                     decode_reference, decode_same_precision,
                                                     fill_past, state_of)
from grader.judge.answers import diagnose
from grader.judge.answers.compare import EPS, assert_right_answer, assert_shape
from grader.judge.answers.inputs import chunks, randn, round_to, tensor

# the checks whose ideas explain a wrong answer in a property check's call (the first that
# failed leads; compare.assert_right_answer)
ANSWER_CHECKS = ("flash_decode.matches_reference", "flash_decode.ragged_lengths",
                 "flash_decode.gqa_heads", "flash_decode.padded_keys_masked",
                 "flash_decode.max_in_last_split")


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
        assert_merge(sub, order, expected, f"merge_partials with an empty split {where}", rng.seed)
    # row 1 has no keys in the first split only (a shorter sequence): masked as -inf there
    masked = s.copy()
    masked[1, :80] = -np.inf
    mixed = [state_of(masked[:, :80], v[:80]), state_of(masked[:, 80:], v[80:])]
    assert_merge(sub, mixed, attention_rows(masked, v), "merge_partials where row 1's first split "
                 "holds no keys", rng.seed)
    # a row with no keys in any split (a sequence of length 0): o = 0, as documented
    s0 = s.copy()
    s0[2] = -np.inf
    none = [state_of(s0[:, c], v[c]) for c in chunks(rng, n, 3)]
    want = attention_rows(s0[:2], v)
    assert_merge(sub, none, np.vstack([want, np.zeros((1, D))]), "merge_partials where row 2 "
                 "has no keys in any split (o must be 0 there)", rng.seed)
    assert_merge(sub, [(-np.inf, 0.0, np.zeros(D))] * 2, np.zeros(D),
                 "merge_partials of two empty states of one row (o must be 0)", rng.seed)


SPLIT_NAN_HINT = ("nan in the output: a split that holds no keys must hand back the empty state "
                  "(-inf, 0, 0) (its loop should not run: hi = min(lo + split_size, seq_len)), and "
                  "the merge must never compute -inf - (-inf) (shift by 0 where the max is -inf).")
EMPTY_SPLITS_HINT = ("Right with num_splits=1 on the same inputs, wrong with {splits} splits, "
                     "most of which hold no keys: a split past seq_len must hand back the empty "
                     "state (-inf, 0, 0) (its loop should not run: hi = min(lo + split_size, "
                     "seq_len)), and the merge must treat the empty state as the identity.")


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
        q, k, v = decode_inputs(rng, B, Hq, Hkv, L, D)
        k, v = fill_past(k, v, lens, 0.0, 0.0)
        assert_decode(sub, q, k, v, lens, num_splits=splits, seed=rng.seed,
                      nan_hint=SPLIT_NAN_HINT, case=f"{splits} splits: most hold no keys",
                      split_hint=EMPTY_SPLITS_HINT)


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
        k, v = fill_past(k, v, lens, garbage[:, :, :1], 100.0)
        assert_decode(sub, q, k, v, lens, num_splits=1, seed=rng.seed,
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
    # merge (and, within the last split, by alpha). Full lengths: no split is empty here, and
    # cdiv(L, splits) is a multiple of 16 (48, 32), so the split boundaries are the same for any
    # split rule and only the merge's rescale is tested (split alignment: matches_reference).
    # The other coordinates add at most 2 to any score (each head's q shrunk to that), so the
    # max is in the last split in every draw and no score passes 10: exp(s) stays inside
    # float16 (65504 = e^11.09), and a kernel without the max subtraction (large_scores' idea)
    # is right here in every draw, not only in most (tools/mutant_repeat.py finds such checks)
    for B, Hq, Hkv, L, D, splits in ((2, 2, 2, 192, 64, 4), (1, 1, 1, 256, 64, 8)):
        q, k, v = decode_inputs(rng, B, Hq, Hkv, L, D)
        rest = np.abs(np.einsum("bhd,bhnd->bhn", q[..., 1:].astype(np.float64),
                                k[..., 1:].astype(np.float64))).max(axis=2) / np.sqrt(D)
        q[..., 1:] = round_to(q[..., 1:] * np.minimum(1.0, 1.9 / rest)[..., None], "float16")
        q[..., 0] = 8.0
        k[..., 0] = 0.0
        k[..., L - 4:, 0] = 8.0
        assert_decode(sub, q, k, v, [L] * B, num_splits=splits, seed=rng.seed,
                      case="the max scores are the last 4 keys", split_hint=UNRESCALED_SPLITS_HINT)


UNRESCALED_SPLITS_HINT = ("Right with num_splits=1 on the same inputs, wrong with {splits} splits "
                          "where the max sits in the last one: the merge must rescale each split "
                          "onto the common max, l_s * exp(m_s - m) and acc_s * exp(m_s - m), "
                          "before adding.")


@pytest.mark.check("flash_decode.large_scores")
def test_large_scores(student, rng):
    sub = student()
    # q, k ~ 10 * randn, D = 64: scores ~ +-100, row maxima ~ 250, past float32 exp's overflow
    # at 88.7: exp(s) without the running max is inf, and inf / inf is nan
    B, Hq, Hkv, L, D = 2, 2, 2, 96, 64
    q, k, v = decode_inputs(rng, B, Hq, Hkv, L, D, scale=10.0)
    # one key per row scores 30 above the rest, so p is one-hot with or without 1/sqrt(D):
    # a missing scale (matches_reference's idea) showed here in some draws and not in others
    for b in range(B):
        for h in range(Hq):
            qq = q[b, h].astype(np.float64)
            top = float((k[b, h].astype(np.float64) @ qq).max()) / np.sqrt(D)
            j = int(rng.integers(L))
            k[b, h, j] = round_to(qq * ((top + 30.0) * np.sqrt(D) / float(qq @ qq)), "float16")
    # Scores this large are held to ~0.15 in float16 (PyTorch in float16 rounds them too), and a
    # near-tie at the max turns that into o errors PyTorch's own draw may happen to miss: the
    # floor is the first-order change of o when every score moves by one rounding,
    # EPS * max |s| * max |v| (~0.5 here). The check's idea is overflow: nan or inf, far above.
    s = np.einsum("bhd,bhnd->bhn", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(D)
    floor = EPS["float16"] * float(np.abs(s).max()) * float(np.abs(v).max())
    assert_decode(sub, q, k, v, [L, L], num_splits=3, seed=rng.seed, floor=floor,
                  case="q, k scaled by 10: scores up to ~300",
                  nan_hint="nan with scores up to ~300: exp(s) overflows float32 past 88.7 and "
                           "inf / inf is nan. Subtract the running max in every split: p = exp(s "
                           "- m_new).")


@pytest.mark.check("flash_decode.uses_kernel")
def test_uses_kernel(student, rng):
    sub = student()
    q, k, v = decode_inputs(rng, 2, 2, 2, 40, 64)
    lens = np.array([40, 23], np.int32)
    r = sub.call("flash_decode", *(tensor(t, "float16") for t in (q, k, v)),
                 tensor(lens, "int32", poison=0.0), opts={"trace": True})
    assert_shape(r.value, q.shape, what="flash_decode(q, k_cache, v_cache, seq_lens)",
                 dtype="float16")
    # launching kernels that compute something else earns nothing either
    assert_right_answer(r.value, decode_reference(q, k, v, lens), prop="launched its kernels",
                        follows=ANSWER_CHECKS, what="flash_decode(q, k_cache, v_cache, seq_lens)",
                        dtype="float16", case="B=2, Hq=2, Hkv=2, L=40, D=64, seq_lens [40, 23]",
                        seed=rng.seed, baseline=decode_same_precision(q, k, v, lens, "float16"))
