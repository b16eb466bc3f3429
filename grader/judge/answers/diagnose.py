"""What a few of the lesson's mistakes would have produced, so a failure can say which one it is.

A check that fails computes, here in the trusted process and from the same inputs, the answer of
each mistake that the evidence could point at (attention without the 1/sqrt(d) scale, acc not
divided by l, the last key block alone, acc not rescaled by alpha, padded keys scored 0, the
short last block skipped; softmax without the division, padded lanes read as 0). When the
student's output equals one of them to tolerance, the failure's hint names that mistake and the
lesson idea it breaks; when none matches, no hint is made up (the registry's general hint
stays). A match is evidence: each of these answers differs from the right one by O(1) on the
checks' inputs, so a wrong output does not equal one of them by accident.

    hint = attention_hint(got, q, k, v, block_n=32, dtype="float16")
    raise CheckFailed(str(error), hint=hint)

All references are float64 over the last two axes (q, k, v: (..., N, d)).
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


# ------------------------------------------------------------------------------ attention


def _scores(q, k, scaled: bool = True) -> np.ndarray:
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    s = q @ np.swapaxes(k, -1, -2)
    return s / np.sqrt(q.shape[-1]) if scaled else s


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
        elif np.isnan(_f64(got)).all():
            return NONE_USED.format(n=n, block=block_n)
    return first_match(got, candidates, atol, rtol)


# ------------------------------------------------------------------------------ softmax

SOFTMAX_DIVIDE = ("The output equals exp(x - max) without the division by the row sum, to "
                  "tolerance: divide the numerator by den = tl.sum(num, axis=0).")
SOFTMAX_PADDED = ("The output equals the softmax of each row with its {pad} padded lanes (a "
                  "block of {block}) read as 0, to tolerance: they raised the max and the row "
                  "sum. Load the padding as other=-inf: exp(-inf - max) = 0 adds nothing.")


def softmax_hint(got, x, *, dtype: str | None = None, block: int | None = None) -> str:
    """The hint for a row softmax output that equals a known mistake's answer, else ""."""
    x = np.asarray(x, dtype=np.float64)
    atol, rtol = tolerance(dtype)
    n = x.shape[-1]
    block = block or 1 << max(n - 1, 0).bit_length()

    def padded():
        m = np.maximum(x.max(-1, keepdims=True), 0.0)
        e = np.exp(x - m)
        return e / (e.sum(-1, keepdims=True) + (block - n) * np.exp(-m))

    candidates = [(lambda: np.exp(x - x.max(-1, keepdims=True)), SOFTMAX_DIVIDE)]
    if block > n:
        candidates.append((padded, SOFTMAX_PADDED.format(pad=block - n, block=block)))
    return first_match(got, candidates, atol, rtol)


# ------------------------------------------------------------------------------ by case


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
