"""Comparing a student's output with a float64 reference, with messages a student can act on.

Tolerances are per output dtype, against a float64 reference computed from the exact input values
the student received. They sit a few units of rounding above what a correct same-precision
implementation gets (flash-attention's rule is "at most twice a same-precision PyTorch
baseline"; `baseline_err` lets a check apply it), and far below what any of the lesson's
mistakes produce (a missing rescale or mask is off by O(1)). NaN never passes.
"""

from __future__ import annotations

import numpy as np

from grader.sandbox.codec import TensorValue

# dtype of the output → (atol, rtol) against float64
TOLERANCES = {
    "float64": (1e-9, 1e-9),      # NumPy float64: rounding only
    "float32": (2e-5, 2e-5),      # float32 sums over a few thousand terms
    "float16": (3e-3, 3e-3),      # output rounding 2^-11 plus p cast to fp16 before the dot
    "bfloat16": (2e-2, 2e-2),     # 8-bit mantissa: rounding 2^-8 on p and on the output
}


class CheckFailed(AssertionError):
    """A wrong answer (status failed).

    hint: what this failure's evidence points at ("the error starts where the row max moves
    into a later key block: is acc rescaled by alpha?"). The report shows it instead of the
    registry's general hint, which is only the fallback."""

    def __init__(self, message: str = "", hint: str = ""):
        super().__init__(message)
        self.hint = hint


def dtype_name(x) -> str:
    if isinstance(x, TensorValue):
        return x.dtype
    return np.asarray(x).dtype.name


def values(x) -> np.ndarray:
    return x.array if isinstance(x, TensorValue) else np.asarray(x)


def where(index: tuple) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def assert_close(got, expected, *, what: str = "output", dtype: str | None = None,
                 atol: float | None = None, rtol: float | None = None,
                 baseline_err: float | None = None, case: str = "", seed: int | None = None) -> float:
    """Fail with "expected vs got" unless `got` matches `expected` everywhere.

    got: what the student returned (NumPy array, TensorValue or number).
    expected: float64 reference values. dtype: the dtype the output must have (checked when
    given). Returns the max abs error.
    """
    context = "".join([f" ({case})" if case else "", f" [seed {seed}]" if seed is not None else ""])
    got_dtype = dtype_name(got) if not np.isscalar(got) else type(got).__name__
    if dtype is not None and got_dtype != dtype:
        raise CheckFailed(f"{what}{context}: expected dtype {dtype}, got {got_dtype}")
    g = np.asarray(values(got), dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if g.shape != e.shape:
        raise CheckFailed(f"{what}{context}: expected shape {tuple(e.shape)}, got {tuple(g.shape)}")
    if e.size == 0:
        return 0.0
    table = TOLERANCES.get(dtype or got_dtype, TOLERANCES["float32"])
    atol = table[0] if atol is None else atol
    rtol = table[1] if rtol is None else rtol
    if baseline_err is not None:
        atol = max(atol, 2 * baseline_err)
    nan = np.isnan(g) & ~np.isnan(e)
    if nan.any():
        idx = np.unravel_index(np.argmax(nan), g.shape)
        raise CheckFailed(f"{what}{context}: got NaN at {where(idx)} ({int(nan.sum())} of {g.size} "
                          f"elements are NaN); expected {e[idx]:.6g} there")
    inf = np.isinf(g) & ~np.isinf(e)
    if inf.any():
        idx = np.unravel_index(np.argmax(inf), g.shape)
        raise CheckFailed(f"{what}{context}: got {g[idx]} at {where(idx)} ({int(inf.sum())} "
                          f"elements overflowed); expected {e[idx]:.6g}")
    err = np.abs(g - e)
    err[np.isinf(e) & (g == e)] = 0.0
    bad = err > atol + rtol * np.abs(e)
    worst = float(err.max())
    if bad.any():
        idx = np.unravel_index(np.argmax(np.where(bad, err, -1.0)), g.shape)
        raise CheckFailed(
            f"{what}{context}: max abs error {worst:.3g} at {where(idx)}: got {g[idx]:.6g}, "
            f"expected {e[idx]:.6g}; {int(bad.sum())} of {g.size} elements outside "
            f"atol={atol:g}, rtol={rtol:g}")
    return worst


def assert_shape(got, shape: tuple, what: str = "output", dtype: str | None = None) -> None:
    got_shape = tuple(values(got).shape) if not np.isscalar(got) else ()
    if got_shape != tuple(shape):
        raise CheckFailed(f"{what}: expected shape {tuple(shape)}, got {got_shape}")
    if dtype is not None and dtype_name(got) != dtype:
        raise CheckFailed(f"{what}: expected dtype {dtype}, got {dtype_name(got)}")
