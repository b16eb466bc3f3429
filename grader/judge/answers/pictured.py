"""What a picture of a failed comparison needs, taken where the comparison failed.

`compare.assert_close` calls `capture` just before it raises a NaN, inf or values failure. It
runs in the trusted process on values it already holds (the student's output as decoded, the
float64 reference), never in a worker. The result is plain JSON (a grading process sends its
Results to the main one as JSON, grader/parallel.py) and small: one 2-D slice of the output,
pooled to at most MAX_ROWS x MAX_COLS cells. grader/report/pictures.py draws it after every
worker has stopped.

    {"what", "case", "kind": "values" | "nan" | "inf", "shape": full shape,
     "slice": the leading index of the slice drawn (3- and 4-D outputs: the worst (batch, head)),
     "rows", "cols": the slice's size, "row_step", "col_step": elements per cell,
     "grid": [rows per block, columns per block] (the exercise's tiles; None: no blocks),
     "atol", "rtol", "wrong_count", "size",
     "got", "expected": cell means (None where not finite),
     "ratio": per cell, the largest |got - expected| / (atol + rtol |expected|) (None: inf),
     "wrong": a string per cell row, "1" where an element of the cell is wrong,
     "special": a string per cell row: "n" NaN, "+" inf, "-" -inf in got, "." none,
     "rows_wrong", "cols_wrong": one character per row / column of the slice, "1" wrong}
"""

from __future__ import annotations

import math

import numpy as np

MAX_ROWS, MAX_COLS = 64, 64   # cells of a picture: 64 x 64 keeps it a few tens of KB


def wrong_map(got, expected, atol: float, rtol: float) -> np.ndarray:
    """The elements assert_close calls wrong, as a boolean array of the output's shape: NaN or
    inf where the reference is not, or |got - expected| > atol + rtol * |expected|. This is the
    map a picture draws (pooled to cells) and a test reads."""
    g = np.asarray(got, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        nan = np.isnan(g) & ~np.isnan(e)
        inf = np.isinf(g) & ~np.isinf(e)
        err = np.abs(g - e)
        err[np.isinf(e) & (g == e)] = 0.0
        return nan | inf | (err > atol + rtol * np.abs(e))


def _host(x) -> np.ndarray:
    """A NumPy float64 copy of x (a torch tensor is copied from its device)."""
    if hasattr(x, "detach"):
        x = x.detach().double().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def _worst_slice(g, e, bad, kind: str, index: tuple) -> tuple:
    """The leading index of the 2-D slice to draw: the one holding the message's element for a
    wrong value (the largest error), the one with the most NaN or inf otherwise."""
    lead = tuple(int(i) for i in index[:-2])
    if kind == "values" or not lead:
        return lead
    counts = bad.reshape(-1, bad.shape[-2] * bad.shape[-1]).sum(1)
    flat = int(counts.argmax())
    return tuple(int(i) for i in np.unravel_index(flat, tuple(bad.shape[:-2])))


def capture(got, expected, bad, *, atol: float, rtol: float, kind: str, index: tuple,
            what: str = "", case: str = "", grid: tuple | None = None) -> dict | None:
    """The picture of one failed comparison (the module's docstring says what it holds), or
    None where there is nothing to draw (a scalar). got, expected: float64 arrays of the same
    shape (NumPy, or torch tensors on the reference's device); bad: assert_close's map of what
    failed (NaN, inf or values), used only to choose the slice; index: the message's element."""
    shape = tuple(int(n) for n in expected.shape)
    if len(shape) == 0 or math.prod(shape) < 2:
        return None
    lead = _worst_slice(got, expected, bad, kind, index) if len(shape) > 2 else ()
    g, e = _host(got[lead]), _host(expected[lead])
    if g.ndim == 1:
        g, e = g[None, :], e[None, :]
    wrong = wrong_map(g, e, atol, rtol)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        err = np.abs(g - e)
        err[np.isinf(e) & (g == e)] = 0.0
        ratio = err / (atol + rtol * np.abs(e))
    ratio[np.isnan(g) & ~np.isnan(e)] = np.inf
    ratio[np.isnan(ratio)] = 0.0   # NaN in the reference too: not judged
    R, C = g.shape
    rs, cs = math.ceil(R / MAX_ROWS), math.ceil(C / MAX_COLS)
    rows, cols = np.arange(0, R, rs), np.arange(0, C, cs)

    def pool(x, how):
        return how.reduceat(how.reduceat(x, rows, axis=0), cols, axis=1)

    counts = np.outer(np.diff(np.append(rows, R)), np.diff(np.append(cols, C)))
    with np.errstate(invalid="ignore", over="ignore"):
        g_mean, e_mean = pool(g, np.add) / counts, pool(e, np.add) / counts
    special = np.full(counts.shape, ".")
    for mark, where in (("-", np.isneginf(g)), ("+", np.isposinf(g)), ("n", np.isnan(g))):
        special[pool(where.astype(np.uint8), np.maximum) > 0] = mark
    return {
        "what": what, "case": case, "kind": kind, "shape": list(shape), "slice": list(lead),
        "rows": R, "cols": C, "row_step": rs, "col_step": cs,
        "grid": [_block(b) for b in (grid or (None, None))],
        "atol": float(atol), "rtol": float(rtol),
        "wrong_count": int(wrong.sum()), "size": int(wrong.size),
        "got": _numbers(g_mean), "expected": _numbers(e_mean),
        "ratio": _numbers(pool(ratio, np.maximum)),
        "wrong": _marks(pool(wrong.astype(np.uint8), np.maximum) > 0),
        "special": ["".join(row) for row in special],
        "rows_wrong": "".join("1" if x else "0" for x in wrong.any(axis=1)),
        "cols_wrong": "".join("1" if x else "0" for x in wrong.any(axis=0)),
    }


def _block(b) -> int | None:
    return int(b) if b else None


def _numbers(x: np.ndarray) -> list:
    """Rows of numbers to 4 significant digits, None where not finite (JSON has no NaN)."""
    return [[float(f"{v:.4g}") if math.isfinite(v) else None for v in row] for row in x.tolist()]


def _marks(mask: np.ndarray) -> list[str]:
    return ["".join("1" if x else "0" for x in row) for row in mask]
