"""The attention mistakes a failure can name, by the answer each would have produced: attention
without the 1/sqrt(d) scale, acc not divided by l, the last key block alone, acc not rescaled by
alpha, padded keys scored 0, the short last key block skipped. tiled_attention's lesson brings in
the loop over key blocks that these mistakes break, so its catalog lives here; flash_triton's
judging asks it too (its kernel runs the same loop, so its texts name both: Bc and BLOCK_N,
range(0, N, Bc) and tl.where).

A check that fails computes, here in the trusted process and from the same inputs, the answer of
each mistake that the evidence could point at. When the student's output equals one of them to
tolerance (grader.judge.answers.diagnose), the failure's hint names that mistake and the lesson
idea it breaks; when none matches, no hint is made up (the registry's general hint stays). A
match is evidence: each of these answers differs from the right one by O(1) on the checks'
inputs, so a wrong output does not equal one of them by accident.

    hint = attention_hint(got, q, k, v, block_n=32, dtype="float16")
    raise CheckFailed(str(error), hint=hint)

All references are float64 over the last two axes (q, k, v: (..., N, d)).
"""

from __future__ import annotations

import numpy as np

from grader.judge.answers.compare import values
from grader.judge.answers.diagnose import attend, first_match, tolerance


def _scores(q, k, scaled: bool = True) -> np.ndarray:
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    s = q @ np.swapaxes(k, -1, -2)
    return s / np.sqrt(q.shape[-1]) if scaled else s


def _online_acc_not_rescaled(q, k, v, block_n: int) -> np.ndarray:
    """Online softmax over key blocks of block_n where l is rescaled by alpha and acc is not."""
    s = _scores(q, k)
    v = np.asarray(v, dtype=np.float64)
    m = np.full(s.shape[:-1], -np.inf)
    l = np.zeros(s.shape[:-1])
    acc = np.zeros(s.shape[:-1] + v.shape[-1:])
    for j in range(0, s.shape[-1], block_n):
        sb = s[..., j:j + block_n]
        m_new = np.maximum(m, sb.max(-1))
        p = np.exp(sb - m_new[..., None])
        l = l * np.exp(m - m_new) + p.sum(-1)
        acc = acc + p @ v[..., j:j + block_n, :]
        m = m_new
    return acc / l[..., None]


SCALE = ("The output equals softmax(q k^T) v without the 1/sqrt(d) scale, to tolerance: "
         "multiply the scores by scale = 1/sqrt(d) (s = q k^T * scale) before the softmax.")
DIVIDE = ("The output equals acc without the final division by l, exp(s - m) v to tolerance: "
          "divide by the row sum at the end, O = acc / l (acc / l_i[:, None] in the kernel).")
LAST_BLOCK = ("The output equals attention over the last key block alone (keys {lo}..{hi}), to "
              "tolerance: what the earlier blocks summed was wiped out. That is what alpha = "
              "exp(m_i - m_new) = 0 does at every block when m_i stays -inf: is m_i set to m_new "
              "after each block?")
ALPHA = ("The output equals an online softmax that rescales l by alpha but not acc, to "
         "tolerance (Break It 2: the row max moves in a later key block here). Rescale acc as "
         "l is: acc = acc * alpha + p @ v, alpha = exp(m_i - m_new).")
PADDED = ("The output equals attention with {pad} extra keys of score 0 and value 0 per row, "
          "the padding of the last key block of {block} (loaded as 0), to tolerance: those "
          "scores must be -inf, s = tl.where(cols < N, s, float('-inf')), so exp gives them "
          "weight 0.")
SHORTER = ("The output equals attention over the first {kept} keys only, to tolerance: the "
           "last key block, shorter than Bc = {block} ({short} keys), was skipped. Loop over "
           "range(0, N, Bc) and slice K[j:j + Bc]: the last slice is simply shorter.")
NONE_USED = ("Every output element is NaN here, where N = {n} is smaller than the key block "
             "({block}): as if no key block was used (l = 0, 0 / 0)? The only block is shorter "
             "than Bc; range(0, N, Bc) with K[j:j + Bc] includes it.")


def attention_hint(got, q, k, v, *, block_n: int | None = None, dtype: str | None = None,
                   input_dtype: str | None = None) -> str:
    """The hint for an attention output that equals a known mistake's answer, else ""."""
    n = np.shape(k)[-2]
    terms = n if input_dtype is not None else 1
    atol, rtol = tolerance(dtype, input_dtype, terms)
    candidates = [
        (lambda: attend(_scores(q, k, scaled=False), v), SCALE),
        (lambda: attend(_scores(q, k), v, divide=False), DIVIDE),
    ]
    if block_n and n > block_n:
        lo = (n - 1) // block_n * block_n
        candidates += [
            (lambda: attend(_scores(q, k[..., lo:, :]), v[..., lo:, :]),
             LAST_BLOCK.format(lo=lo, hi=n - 1)),
            (lambda: _online_acc_not_rescaled(q, k, v, block_n), ALPHA),
        ]
    if block_n and n % block_n:
        pad = -(-n // block_n) * block_n - n
        candidates.append((lambda: attend(_scores(q, k), v, pad=pad),
                           PADDED.format(pad=pad, block=block_n)))
        kept = n - n % block_n
        if kept:
            candidates.append((lambda: attend(_scores(q, k[..., :kept, :]), v[..., :kept, :]),
                               SHORTER.format(kept=kept, block=block_n, short=n % block_n)))
        elif np.isnan(np.asarray(values(got), dtype=np.float64)).all():
            return NONE_USED.format(n=n, block=block_n)
    return first_match(got, candidates, atol, rtol)
