"""The extension track's diagnosis from evidence, without a worker (issue 23): each known
mistake's answer, computed by the exercise's own mistake references, gets the hint that names
that mistake; a right answer with one wrong row gets no named mistake, only what differs.
(The mutants in tests/exercises/*/mutants.py check the same through whole grades.)"""

from __future__ import annotations

import numpy as np
import pytest

from grader.registry import exercise_module

ab_mistakes = exercise_module("attention_backward", "mistakes")
ab_reference = exercise_module("attention_backward", "reference")
fb_mistakes = exercise_module("flash_backward", "mistakes")
fd_mistakes = exercise_module("flash_decode", "mistakes")
fd_reference = exercise_module("flash_decode", "reference")


@pytest.mark.parametrize("causal", [False, True])
def test_attention_backward_names_each_mistake(causal):
    rng = np.random.default_rng(1)
    N, d, Br, Bc = 77, 32, 24, 10
    Q, K, V, dO = (rng.standard_normal((N, d)) for _ in range(4))
    O, L = ab_reference.forward_reference(Q, K, V, causal)
    for mistake in ab_mistakes.mistakes_for(N, causal, Bc):
        got = ab_reference.backward_reference(Q, K, V, O, L, dO, causal, mistake, Bc, Br)
        hint = ab_mistakes.backward_hint(got, Q, K, V, O, L, dO, causal, Br, Bc)
        want = ab_mistakes.MISTAKES[mistake].format(lo=70, hi=N - 1, Bc=Bc)
        assert hint == want, (mistake, hint)
    got = [g.copy() for g in ab_reference.backward_reference(Q, K, V, O, L, dO, causal)]
    got[1][5] += 1.0
    hint = ab_mistakes.backward_hint(got, Q, K, V, O, L, dO, causal, Br, Bc)
    assert hint.startswith(ab_mistakes.NO_MATCH) and "dK in 1 of 77 rows (5)" in hint, hint


@pytest.mark.parametrize("causal", [False, True])
def test_flash_backward_names_each_mistake(causal):
    rng = np.random.default_rng(2)
    q, k, v, do = (rng.standard_normal((1, 2, 45, 16)) for _ in range(4))
    bm, bn = 16, 32
    for mistake in fb_mistakes.candidates(45, causal, bm, bn):
        got = fb_mistakes.grads(q, k, v, do, causal, mistake, bm, bn)
        hint = fb_mistakes.grad_hint(got, q, k, v, do, causal, bm, bn)
        assert hint == fb_mistakes.MISTAKE_HINTS[mistake].format(lo=32, hi=44, bn=bn, bm=bm), mistake
    got = [g.copy() for g in fb_mistakes.grads(q, k, v, do, causal)]
    got[2][0, 1, 40] += 1.0
    hint = fb_mistakes.grad_hint(got, q, k, v, do, causal, bm, bn)
    assert hint.startswith(fb_mistakes.NO_MATCH) and "dv in 1 of 45 rows (40)" in hint, hint


def test_flash_decode_names_the_scale_and_the_merge():
    rng = np.random.default_rng(3)
    q, k, v = fd_reference.decode_inputs(rng, 2, 2, 2, 192, 64, "float64")
    lens = [192, 150]
    atol = rtol = 3e-3
    unscaled = fd_reference.decode_reference(q * 8.0, k, v, lens)    # sqrt(64) = 8
    assert fd_mistakes.match(unscaled, q, k, v, lens, 4, atol, rtol)[0] == fd_mistakes.NO_SCALE_HINT
    right = fd_reference.decode_reference(q, k, v, lens)
    assert fd_mistakes.match(right + 2e-3, q, k, v, lens, 4, atol, rtol) is None
    off = right.copy()
    off[1, 0] += 1.0
    said = fd_mistakes.what_differs(off, right, lens, atol, rtol)
    assert "b=1 (seq_len 150): heads 0" in said and "1 of 4" in said, said


def test_softmax_long_names_each_mistake():
    sl = exercise_module("softmax_long", "mistakes")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 150))
    x[:, 140] += 9.0                                    # the max moves in the last block
    right = np.exp(x - x.max(1, keepdims=True))
    right /= right.sum(1, keepdims=True)
    hint, follows = sl.hint(sl.no_rescale(x, 32), x, right, dtype="float16", block=32)
    assert hint == sl.NO_RESCALE.format(block=32) and follows == ("softmax_long.max_in_last_block",)
    hint, follows = sl.hint(sl.one_past(x), x, right, dtype="float32", block=32)
    assert hint == sl.ONE_PAST and follows == ("softmax_long.masked_accesses",)
    hint, follows = sl.hint(right * (1 + 1e-3), x, right, dtype="float32", block=32)
    assert hint.startswith("Each wrong row is off by one factor") and "float16" in hint
    big = x * 40
    blown = np.where(big > 88.7, np.nan, 0.0)          # exp(x) overflowed: inf / inf
    assert sl.hint(blown, big, right, dtype="float16", block=32)[0].startswith("inf or nan")
    low = x - 200
    assert "-inf" in sl.hint(np.full_like(x, np.nan), low, right, dtype="float16", block=32)[0]
    wrong = right.copy()
    wrong[1, 3] += 0.5                                  # one wrong element: no mistake named
    assert sl.hint(wrong, x, right, dtype="float16", block=32) == ("", ())
