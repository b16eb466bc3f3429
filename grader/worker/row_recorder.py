"""`RowRecorder`: a real (N, d) ndarray subclass for tiled_attention's K and V that logs which
rows each NumPy operation reads (`widest_rows`, `passes`), so a whole row of N scores at once
(K @ q) and a pass over K for the max alone are seen; `np.asarray(K)` is where it stops, as for
grader.worker.read_recorder (docs/ARCHITECTURE.md says why the check stops there).
"""

from __future__ import annotations

import numpy as np

from grader.worker.recorders import LIVE, METADATA_ONLY, collect


class _RowLog:
    """Which rows of one (N, d) input NumPy read, and how: `widest` (the most rows one read
    covered) and `passes` (a pass starts when a read begins before the one before it: the
    blocks of one pass go forward; reading the same block again stays in it)."""
    __slots__ = ("name", "n", "base", "row", "end", "passes", "widest", "reads", "copies", "last")

    def __init__(self, name: str, a: np.ndarray):
        self.name, self.n = name, a.shape[0]
        self.base = a.ctypes.data
        self.row = a.strides[0] if a.ndim and a.strides[0] else a.itemsize
        self.end = self.base + a.nbytes
        self.passes = self.widest = self.reads = self.copies = 0
        self.last = -1

    def rows(self, a: np.ndarray):
        """The rows [first, stop) of the recorded array that `a` (a view of it) covers."""
        lo = hi = a.ctypes.data   # (__array_interface__ leaks memory that tracemalloc sees)
        for n, st in zip(a.shape, a.strides):
            if n == 0:
                return None
            if st > 0:
                hi += (n - 1) * st
            else:
                lo += (n - 1) * st
        if lo < self.base or hi >= self.end:
            return None
        return (lo - self.base) // self.row, (hi - self.base) // self.row + 1

    def read(self, a: np.ndarray) -> None:
        span = self.rows(a)
        if span is None:
            return
        first, stop = span
        self.reads += 1
        self.widest = max(self.widest, stop - first)
        if first < self.last or self.passes == 0:
            self.passes += 1
        self.last = first

    def summary(self) -> dict:
        return {"name": self.name, "n": self.n, "passes": self.passes, "widest_rows": self.widest,
                "reads": self.reads, "copies": self.copies}


class RowRecorder(np.ndarray):
    """A read-only (N, d) ndarray (a real one: every NumPy function and method works, views
    included) that logs which of its rows each NumPy operation reads, for tiled_attention's K
    and V: `K[j:j+Bc]` read by `q @ k.T` logs rows [j, j+Bc); `K @ q` logs all N; a copy
    (`K[j:j+Bc].astype(...)`, `K.copy()`) logs what it copied, and is a plain array after.

    Reads are seen where NumPy lets a subclass see them: ufuncs (arithmetic, `@`, exp, max and
    sum as reductions), the functions that dispatch on `__array_function__` (np.dot, einsum,
    concatenate, ...), `.dot` and copies. Not seen: whatever is done with `np.asarray(K)` or
    `K.view(np.ndarray)`, which are plain arrays over the same memory (NumPy hands them out
    without asking the subclass). The trusted side gives no verdict on an input whose reads it
    did not see; docs/ARCHITECTURE.md says why that is the line."""

    def __new__(cls, values, dtype: str = "float64", name: str = "x"):
        a = np.array(values, dtype=dtype, order="C")
        a.flags.writeable = False
        obj = a.view(cls)
        obj._log = _RowLog(name, a)
        LIVE.append(obj)
        return obj

    def __array_finalize__(self, obj):
        log = getattr(obj, "_log", None)
        if log is None or log.rows(self) is not None:
            self._log = log            # a view of the recorded rows (or not recorded at all)
            return
        self._log = None               # a copy: it read obj now, and is not recorded after
        log.copies += 1
        log.read(obj)

    def _plain(self, log_read: bool = True) -> np.ndarray:
        if log_read and self._log is not None:
            self._log.read(self)
        return self.view(np.ndarray)

    # No closures or generator expressions below: each would leave a reference cycle per
    # NumPy operation, garbage that tracemalloc counts until the collector runs (95 KB of peak
    # over 2000 products, enough to fail a memory check)
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = [_unwrap(x, True) for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple([_unwrap(o, False) for o in kwargs["out"]])
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if func in _ROW_VIEWS:          # np.split, np.transpose, ...: views, nothing read yet
            return super().__array_function__(func, types, args, kwargs)
        reads = func not in METADATA_ONLY
        return func(*[_unwrap(a, reads) for a in args],
                    **{k: _unwrap(v, reads) for k, v in kwargs.items()})

    def dot(self, b, out=None):
        return np.dot(self, b, out=out)

    def __reduce__(self):   # the codec never pickles, but a copy sent back must be plain
        return self.view(np.ndarray).__reduce__()


def _unwrap(a, reads: bool):
    """A RowRecorder as a plain view (its read logged if `reads`), also inside lists and tuples."""
    if isinstance(a, RowRecorder):
        return a._plain(reads)
    if isinstance(a, (list, tuple)):
        return type(a)([_unwrap(b, reads) for b in a])
    return a


_ROW_VIEWS = {np.split, np.array_split, np.hsplit, np.vsplit, np.transpose, np.swapaxes,
              np.moveaxis, np.atleast_1d, np.atleast_2d, np.squeeze, np.expand_dims}


def _warm_up() -> None:
    """Run the recorder's machinery once at import, before any measured call: its first use
    imports and caches (numpy's ctypes helpers, the ufunc override path) about 30 KB that
    tracemalloc would count against the first recorded call."""
    a = RowRecorder(np.ones((4, 2)), "float64", "warm-up")
    np.exp(a[:2] @ a[2:].T).sum()
    np.dot(np.ones(2), a.T)
    np.einsum("i,ji->j", np.ones(2), a[1:3])
    np.split(a, 2)[0].astype(np.float32)
    collect()


_warm_up()
