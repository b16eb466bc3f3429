"""What softmax_long would return for the lesson's mistakes, so a failure can say which one it is
(grader/judge/answers/diagnose.py does the same for the other exercises): exp without the max
(overflow past 88.7 in float32), exp(-inf - (-inf)) on a block of only -inf, a max that starts
at 0 instead of -inf (rows far below 0 underflow), the sum not rescaled when the max moves
(computed here block by block, for the BLOCK the check passed), the last block's mask off by
one (each row's max and sum take in the next element in memory), and a row sum kept in low
precision (every row off by one factor close to 1). `hint` returns "" when the evidence points
at none of them: then the registry's general hint stays. With a hint comes the check aimed at
that mistake, so the report groups the failure under it (CheckFailed.follows).
"""

from __future__ import annotations

import numpy as np

from grader.judge.answers import diagnose
from grader.judge.answers.compare import TOLERANCES, values

FP32_EXP_MAX = 88.72   # exp(x) is inf in float32 above this

OVERFLOW = ("inf or nan where the answer is finite, and this input has values up to {top:.0f}: "
            "exp overflows float32 above 88.7, and inf / inf is nan. Subtract the max before "
            "tl.exp: the running max m (long rows) or the row max (short rows), never exp(x).")
NEG_INF = ("nan where the answer is finite, in rows holding a whole block of {block} columns of "
           "-inf: such a block leaves m_new = -inf, and exp(-inf - (-inf)) is nan. Shift by 0 "
           "where m_new is -inf (m_safe = tl.where(m_new == float('-inf'), 0.0, m_new)).")
START_AT_ZERO = ("nan or 0 where the answer is not, on rows whose values all sit near {top:.0f}: "
                 "exp(x - 0) underflows to 0 there, and 0 / 0 is nan. Subtract the row's true "
                 "max: m starts at -inf (not 0), padded lanes load as -inf (not 0), and never "
                 "exp(x) alone.")
NO_RESCALE = ("The output equals an online softmax that adds each block's sum to l without "
              "rescaling it (blocks of {block} columns), to tolerance: when a block raises the max, "
              "the terms already in l were measured against the old max. Rescale: l = l * "
              "exp(m_old - m_new) + sum(exp(x - m_new)).")
ONE_PAST = ("The output equals a softmax whose max and sum also took in the element just past "
            "each row's end (the next row's first), to tolerance: the last block's mask is off by "
            "one. mask = start + cols < n_cols, not <=.")
LOW_PRECISION = ("Each wrong row is off by one factor close to 1 (up to {off:.1e} relative) while "
                 "exp(x - m) is right: the row sum l is off. Keep m and l in float32 and add each "
                 "block's exponentials in float32, never float16; or, if masked_accesses failed "
                 "too, the sum took in an element past the row's end.")


def no_rescale(x: np.ndarray, block: int) -> np.ndarray:
    """The online softmax over column blocks of `block` with l never rescaled, in float64."""
    x = np.asarray(x, dtype=np.float64)
    m = np.full(x.shape[0], -np.inf)
    l = np.zeros(x.shape[0])
    with np.errstate(all="ignore"):
        for j in range(0, x.shape[1], block):
            m = np.maximum(m, x[:, j:j + block].max(axis=1))
            shift = np.where(m == -np.inf, 0.0, m)   # a block of only -inf adds 0, not nan
            l = l + np.exp(x[:, j:j + block] - shift[:, None]).sum(axis=1)
        return np.exp(x - m[:, None]) / l[:, None]


def one_past(x: np.ndarray) -> np.ndarray:
    """softmax of each row of a contiguous x whose max and sum also include the next element in
    memory (the next row's first; nothing after the last row), in float64."""
    x = np.asarray(x, dtype=np.float64)
    nxt = np.append(x[1:, 0], -np.inf)[:, None]
    m = np.maximum(x.max(axis=1, keepdims=True), nxt)
    with np.errstate(all="ignore"):
        e = np.exp(x - m)
        return e / (e.sum(axis=1, keepdims=True) + np.exp(nxt - m))


def _whole_inf_block(x: np.ndarray, block: int) -> bool:
    n = x.shape[1]
    return any(np.isneginf(x[:, j:j + block]).all(axis=1).any() for j in range(0, n - block + 1, block))


EVIDENCE = 4   # a mistake's answer is evidence only where it is this many tolerances off


def _matches(got, candidate, right, atol: float, rtol: float) -> bool:
    """got equals the mistake's answer, and that answer is far from the right one somewhere (on
    these inputs the mistake shows; a near miss is not evidence)."""
    with np.errstate(all="ignore"):
        far = np.abs(candidate - right) > EVIDENCE * (atol + rtol * np.abs(right))
    return bool(far.any()) and diagnose.equals(got, candidate, atol, rtol)


def _row_factor(g: np.ndarray, e: np.ndarray, atol: float, rtol: float) -> float | None:
    """The largest |got / expected - 1| over the wrong rows when each wrong row is expected times
    one factor (to tolerance), else None."""
    off = 0.0
    with np.errstate(all="ignore"):
        bad = ~(np.abs(g - e) <= atol + rtol * np.abs(e))
        for r in np.nonzero(bad.any(axis=1))[0]:
            big = e[r] > 1e-3
            if not big.any() or not np.isfinite(g[r]).all():
                return None
            f = float(np.median(g[r][big] / e[r][big]))
            if not (np.abs(g[r] - f * e[r]) <= atol + rtol * np.abs(e[r])).all():
                return None
            off = max(off, abs(f - 1))
    return off if 0 < off < 1e-2 else None


def hint(got, x, expected, *, dtype: str, block: int | None = None,
         contiguous: bool = True) -> tuple[str, tuple]:
    """(hint, follows) for a softmax output that shows one of the mistakes above, else ("", ()):
    follows names the check aimed at that mistake (the first of them that failed leads)."""
    g = np.asarray(values(got), dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if g.shape != e.shape:
        return "", ()
    finite = x[np.isfinite(x)]
    top = float(finite.max()) if finite.size else 0.0
    if top > FP32_EXP_MAX and diagnose.blew_up(g, e):
        return OVERFLOW.format(top=top), ("softmax_long.fp16_large_values",)
    nan = bool((np.isnan(g) & ~np.isnan(e)).any())
    if nan and block and _whole_inf_block(x, block):
        return NEG_INF.format(block=block), ("softmax_long.neg_inf_blocks",)
    atol, rtol = diagnose.tolerance(dtype)
    if top < -FP32_EXP_MAX and diagnose.zero_or_nan_where_wrong(g, e, *TOLERANCES[dtype]):
        # exp(x) without any max fails here too: that mistake's own check leads when it failed
        return START_AT_ZERO.format(top=top), ("softmax_long.fp16_large_values",
                                               "softmax_long.all_negative_rows")
    if block and x.shape[1] > block and _matches(g, no_rescale(x, block), e, atol, rtol):
        return NO_RESCALE.format(block=block), ("softmax_long.max_in_last_block",)
    if (contiguous and block and x.shape[1] > block and x.shape[1] % block
            and _matches(g, one_past(x), e, atol, rtol)):
        return ONE_PAST, ("softmax_long.masked_accesses",)
    off = _row_factor(g, e, *TOLERANCES[dtype])
    if off is not None:
        # an element too many in l (a mask off by one) looks the same: its check leads if it failed
        return LOW_PRECISION.format(off=off), ("softmax_long.masked_accesses",
                                               "softmax_long.float32_rows")
    return "", ()
