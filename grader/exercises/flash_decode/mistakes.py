"""What flash_decode would return for each known mistake of decoding, in float64 (for hints):
the splits merged without rescaling, the 1/sqrt(D) scale missing, the merge rescaling acc but
not l (or l but not acc), and a split size that is not a multiple of BLOCK_N (each split's last
block runs past its end, so keys at the split boundaries count twice). judging.assert_merge and
judging.assert_decode compare a wrong output with each; when none matches, what_differs says
which (sequence, head) rows are off, and no more.

The splits are the lesson's: split_size = cdiv(cdiv(L_max, num_splits), BLOCK_N) * BLOCK_N, for
every BLOCK_N a kernel may use (16 to 128), and the plain cdiv(L_max, num_splits) too.
"""

from __future__ import annotations

import numpy as np

from grader.exercises.flash_decode.reference import decode_reference, state_of
from grader.judge.answers import diagnose
from grader.judge.answers.compare import values

BLOCKS = (16, 32, 64, 128)

UNRESCALED_HINT = ("Your o equals sum(acc) / sum(l): the splits were added without rescaling. The "
                   "merge rule moves each state onto the common max first: l_a*exp(m_a - m) + "
                   "l_b*exp(m_b - m), and acc the same way.")
NO_SCALE_HINT = ("Your o equals attention without the 1/sqrt(D) scale: s = dot(q, k) * scale, "
                 "scale = 1/sqrt(D), in every split.")
L_NOT_RESCALED_HINT = ("Your o equals a merge that rescales each split's acc by exp(m_s - m) but "
                       "adds the l_s as they are (splits of {size} keys): l needs the same weight, "
                       "l = sum_s l_s * exp(m_s - m).")
ACC_NOT_RESCALED_HINT = ("Your o equals a merge that rescales each split's l by exp(m_s - m) but "
                         "adds the acc_s as they are (splits of {size} keys): acc needs the same "
                         "weight, acc = sum_s acc_s * exp(m_s - m).")
OVERLAP_HINT = ("Your o equals attention where the keys just past each split's end count twice "
                "(splits of {size} keys, blocks of {block}): a split size that is not a multiple "
                "of BLOCK_N lets a split's last block run into the next split. Round split_size "
                "up to a multiple of BLOCK_N, or mask the loads on cols < hi as well.")
EMPTY_GARBAGE_HINT = ("{what} in the output where the answer is finite, while every score here is "
                      "below {top:.1f} (nothing can overflow), and with {splits} splits some hold "
                      "no keys: a split with no keys must hand back the empty state (-inf, 0, 0), "
                      "its loop not run (hi = min(lo + split_size, seq_len)) and the state still "
                      "stored (the partial buffers come from torch.empty: what a split does not "
                      "store is garbage).")


def unrescaled_merge(parts):
    """What merge_partials gives without rescaling: sum of acc / sum of l."""
    with np.errstate(all="ignore"):
        l = sum(np.asarray(p[1], dtype=np.float64) for p in parts)
        acc = sum(np.asarray(p[2], dtype=np.float64) for p in parts)
        return acc / np.asarray(l)[..., None]


def _scores(q, k, lens, b, g, h, scaled=True):
    s = np.asarray(q[b, h], np.float64) @ np.asarray(k[b, g, :lens[b]], np.float64).T
    return s / np.sqrt(q.shape[-1]) if scaled else s


def _split_states(q, k, v, lens, size, block=None):
    """Per (b, h): the (m, l, acc) of each split of `size` keys; block: each split runs whole
    blocks of `block` from its start, up to seq_len (not to its end)."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    B, Hq, D = q.shape
    Hkv = k.shape[1]
    out = {}
    for b in range(B):
        n = int(lens[b])
        for h in range(Hq):
            g = h // (Hq // Hkv)
            s = (q[b, h] @ k[b, g, :n].T / np.sqrt(D))[None]
            parts = []
            for lo in range(0, max(n, 1), size):
                hi = min(lo + size, n)
                if block:
                    hi = min(lo + -(-(hi - lo) // block) * block, n)
                parts.append(state_of(s[:, lo:hi], v[b, g, lo:hi]))
            out[b, h] = parts
    return out


def _merge(states, shape, rescale_l=True, rescale_acc=True):
    o = np.zeros(shape)
    for (b, h), parts in states.items():
        m = max(float(p[0][0]) for p in parts)
        if m == -np.inf:
            continue
        w = [np.exp(float(p[0][0]) - m) if np.isfinite(p[0][0]) else 0.0 for p in parts]
        l = sum((wi if rescale_l else 1.0) * float(p[1][0]) for wi, p in zip(w, parts))
        acc = sum((wi if rescale_acc else 1.0) * p[2][0] for wi, p in zip(w, parts))
        o[b, h] = acc / l
    return o


def split_sizes(L, num_splits):
    """The split sizes a kernel may use for num_splits splits of L_max = L keys."""
    plain = -(-max(L, 1) // num_splits)
    return sorted({plain, *(-(-plain // bn) * bn for bn in BLOCKS)})


# the check aimed at a mistake that every case shows (a failure's `follows`)
MATCHES = ("flash_decode.matches_reference",)


def match(got, q, k, v, lens, num_splits, atol, rtol):
    """(hint, follows) of the first known mistake whose answer the output equals, to twice the
    check's tolerance, else None. Only mistakes whose answer is off the right one by more than
    EVIDENCE times that tolerance count: a match then is evidence, not a near miss."""
    right = decode_reference(q, k, v, lens)
    far = EVIDENCE * (atol + rtol * np.abs(right))
    for answer, hint, follows in _all_twins(q, k, v, lens, num_splits):
        if (np.abs(answer - right) > far).any() and diagnose.equals(got, answer, 2 * atol, 2 * rtol):
            return hint, follows
    return None


EVIDENCE = 4


def _all_twins(q, k, v, lens, num_splits):
    """(answer, hint, follows) of each known mistake on these inputs (num_splits None or 1:
    only the scale); follows: the check a failure that matches it goes under (None: the
    registry's)."""
    out = [(_unscaled(q, k, v, lens), NO_SCALE_HINT, MATCHES)]
    if not num_splits or num_splits == 1:
        return out
    shape = np.shape(q)
    for size in split_sizes(k.shape[2], num_splits):
        states = _split_states(q, k, v, lens, size)
        out += [(_merge(states, shape, rescale_l=False), L_NOT_RESCALED_HINT.format(size=size),
                 None),
                (_merge(states, shape, rescale_acc=False), ACC_NOT_RESCALED_HINT.format(size=size),
                 None)]
        for block in BLOCKS:
            if size % block:
                out.append((_merge(_split_states(q, k, v, lens, size, block), shape),
                            OVERLAP_HINT.format(size=size, block=block), MATCHES))
    return out


def _unscaled(q, k, v, lens):
    D = q.shape[-1]
    return decode_reference(np.asarray(q, np.float64) * np.sqrt(D), k, v, lens)


def empty_garbage_hint(got, expected, q, k, lens, num_splits) -> str:
    """The hint for nan or inf where the answer is finite, when nothing could overflow (every
    score below 11: exp(s) fits even a float16 p) and some split holds no keys; else ''."""
    g = np.asarray(values(got), np.float64)
    if g.shape != expected.shape or not num_splits or num_splits == 1:
        return ""
    bad = ~np.isfinite(g) & np.isfinite(expected)
    if not bad.any():
        return ""
    B, Hq, D = q.shape
    Hkv = k.shape[1]
    top = max((float(np.abs(_scores(q, k, lens, b, h // (Hq // Hkv), h)).max())
               for b in range(B) for h in range(Hq) if lens[b]), default=0.0)
    first = -(-k.shape[2] // num_splits)
    empty = any(int(n) <= (num_splits - 1) * first for n in lens)
    if top >= 11 or not empty:
        return ""
    what = "nan" if np.isnan(g[bad]).any() else "inf"
    return EMPTY_GARBAGE_HINT.format(what=what, top=top, splits=num_splits)


def what_differs(got, expected, lens, atol, rtol) -> str:
    """Which (sequence, head) rows are off: 'No known mistake ... rows b=1 (seq_len 51): heads 0, 1'."""
    g = np.asarray(values(got), np.float64)
    if g.shape != expected.shape:
        return ""
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(g - expected) <= atol + rtol * np.abs(expected))
    rows = bad.any(axis=-1)                    # (B, Hq)
    if not rows.any():
        return ""
    said = [f"b={b} (seq_len {int(lens[b])}): heads {', '.join(map(str, np.flatnonzero(r)))}"
            for b, r in enumerate(rows) if r.any()]
    return (f"No known mistake's answer matches. What differs: {rows.sum()} of {rows.size} "
            f"(sequence, head) rows; " + "; ".join(said[:4]) + ("; ..." if len(said) > 4 else "")
            + ".")
