"""Inputs that record how student code reads them, built inside the worker.

    Trusted("read_recorder", key="x", params={"values": x})   # the trusted side asks for one
    online_max_sum(x)                                          # the student reads it
    extras["reads"] == {"n": 1000, "passes": 1, "whole": 0, ...}

`ReadRecorder` is a 1-D float array stand-in for the `online_max_sum` check "one pass over x";
with keep_shape=True it keeps a 2-D shape, and its reads are ranges of rows (attention_backward's
block skipping: which key rows a block of queries read). Every read of a call also goes, in
order, into `ranges` ([sequence, start, stop], the sequence shared by the call's recorders).
Every read is a range of indices [start, stop):
  - a whole-array read (x.max(), np.exp(x), x - m, np.asarray(x)) reads [0, n);
  - x[i], iteration (for xi in x), and chunks (x[a:b] read any of those ways) read their range.
A new pass starts whenever a read goes back before where the previous read ended (reading the
element just read again, as `max(m, x[i])` then `exp(x[i] - m)` does, is not going back). So
element-wise iteration or chunk-wise reading in order is one pass, and `m = x.max()` followed by
`exp(x - m).sum()` is two.

Copies made by x's own methods stay recorded: x.copy(), x.ravel(), x.astype(...), np.copy(x) are
recorders with the same log, and x.tolist() is a list that logs its reads, so two passes over any
of them are two passes over x. What it cannot see: work done on a copy made through NumPy's
array protocol. `np.asarray(x)` and `np.array(x)` are one whole read, and NumPy requires a plain
ndarray back (it strips a subclass); whatever the code does afterwards with it is invisible.
docs/ARCHITECTURE.md says why the check stops there (the reference solution itself starts with
np.asarray(x, dtype=np.float64).tolist(), then one pass).

`RowRecorder` is a real (N, d) ndarray subclass for tiled_attention's K and V: it logs which rows
each NumPy operation reads (`widest_rows`, `passes`), so a whole row of N scores at once
(K @ q) and a pass over K for the max alone are seen; `np.asarray(K)` is where it stops too.

The logs live in the worker, next to student code, so they are evidence, not a verdict, and a
submission can tell it is watched: they grade the lesson's idea in honest work.
"""

from __future__ import annotations

import numpy as np

_LIVE: list = []    # recorders of the call being run; probes.around_call collects their logs
_SEQ = [0]          # the order of reads across the call's recorders
_MAX_RANGES = 4096  # reads kept in order per recorder (element-wise passes make many)


def collect() -> list[dict]:
    """Logs of the recorders built for this call, in the order they were built; forgets them."""
    logs = [r._log.summary() for r in _LIVE]
    _LIVE.clear()
    return logs


class _Log:
    __slots__ = ("n", "passes", "whole", "elements", "end", "first", "ranges")

    def __init__(self, n: int):
        self.n, self.passes, self.whole, self.elements, self.end, self.first = n, 0, 0, 0, 0, ""
        self.ranges: list = []

    def read(self, start: int, stop: int, how: str) -> None:
        if stop <= start:
            return
        if self.passes == 0 or start < self.end - 1:
            self.passes += 1
            if self.passes == 2 and not self.first:
                self.first = how
        _SEQ[0] += 1
        if len(self.ranges) < _MAX_RANGES:
            self.ranges.append([_SEQ[0], start, stop])
        if start == 0 and stop == self.n:
            self.whole += 1
        else:
            self.elements += stop - start
        self.end = stop

    def summary(self) -> dict:
        return {"n": self.n, "passes": self.passes, "whole_reads": self.whole,
                "second_pass": self.first, "ranges": self.ranges}


class ReadRecorder:
    """A read-only 1-D array of `values` (float64, or `dtype`) that logs every read; with
    keep_shape, an array of values' shape whose reads are ranges of rows."""

    __slots__ = ("_a", "_log", "_offset")
    __array_priority__ = 100

    def __init__(self, values, dtype: str = "float64", _log=None, _offset: int = 0,
                 keep_shape: bool = False):
        self._a = np.array(values, dtype=dtype)
        if not keep_shape:
            self._a = self._a.reshape(-1)
        self._a.flags.writeable = False
        self._offset = _offset
        if _log is None:
            _log = _Log(len(self._a))
            _LIVE.append(self)
        self._log = _log

    # ------------------------------------------------------------------ no reads
    shape = property(lambda self: self._a.shape)
    size = property(lambda self: self._a.size)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)

    def __len__(self) -> int:
        return len(self._a)

    def __repr__(self) -> str:
        return f"array of {self._a.size} {self._a.dtype} values"

    def astype(self, dtype, *args, **kwargs) -> "ReadRecorder":
        """Same values in another dtype, still recorded (a conversion reads nothing yet)."""
        return ReadRecorder(self._a.astype(dtype), str(np.dtype(dtype)), self._log, self._offset,
                            keep_shape=True)

    def _sub(self, s: slice) -> "ReadRecorder":
        start, stop, step = s.indices(len(self._a))
        if step != 1:   # a strided view: read it now, as a whole
            self._read(start, stop, f"x[{s}]")
            return self._a[s]
        sub = ReadRecorder.__new__(ReadRecorder)
        sub._a, sub._log, sub._offset = self._a[start:stop], self._log, self._offset + start
        return sub

    # ------------------------------------------------------------------ reads
    def _read(self, start: int, stop: int, how: str) -> None:
        self._log.read(self._offset + start, self._offset + stop, how)

    def _whole(self, how: str) -> np.ndarray:
        self._read(0, len(self._a), how)
        return self._a

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self._sub(index)
        if isinstance(index, (int, np.integer)):
            i = int(index) + (len(self._a) if int(index) < 0 else 0)
            value = self._a[int(index)]       # raises IndexError like an ndarray
            self._read(i, i + 1, f"x[{i}]")
            return value
        return self._whole(f"x[{index!r}]")[index]

    def __iter__(self):
        for i in range(len(self._a)):
            self._read(i, i + 1, "iterating over x")
            yield self._a[i]

    def item(self, *index):
        if not index:
            return self._whole("x.item()").item()
        return self[index[0]].item()

    def tolist(self):
        """A list that logs its reads into x's log: two passes over x.tolist() are two passes."""
        return _ListRecorder(self._a.tolist(), self._log, self._offset)

    def copy(self, *args, **kwargs) -> "ReadRecorder":
        """A copy is the same values, still recorded (copying reads nothing that counts yet)."""
        return ReadRecorder(self._a, str(self._a.dtype), self._log, self._offset)

    ravel = flatten = copy

    def __array__(self, dtype=None, copy=None):
        a = self._whole("np.asarray(x)")
        return a.astype(dtype) if dtype is not None else a.copy()

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = [i._whole(f"np.{ufunc.__name__}(x)") if isinstance(i, ReadRecorder) else i
                  for i in inputs]
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if func in (np.copy, np.ravel) and args and args[0] is self:
            return self.copy()
        looks = func in _METADATA_ONLY   # np.result_type(x, ...), np.shape(x): no values read

        def unwrap(a):
            if isinstance(a, ReadRecorder):
                return a._a if looks else a._whole(f"np.{func.__name__}(x)")
            if isinstance(a, (list, tuple)):
                return type(a)(unwrap(b) for b in a)
            return a
        return func(*unwrap(list(args)), **kwargs)

    @property
    def flat(self):
        return iter(self)

    def __float__(self):
        return float(self._whole("float(x)"))

    def __bool__(self):
        return bool(self._whole("bool(x)"))


class _ListRecorder(list):
    """x.tolist() of a ReadRecorder: a list of Python floats whose reads (iteration, x[i], slices)
    go into x's log, so `max(xs)` then `sum(exp(v - m) for v in xs)` is two passes."""

    __slots__ = ("_log", "_offset")

    def __init__(self, values, log, offset: int):
        super().__init__(values)
        self._log, self._offset = log, offset

    def __iter__(self):
        start = self._offset
        for i, value in enumerate(list.__iter__(self)):
            self._log.read(start + i, start + i + 1, "iterating over x.tolist()")
            yield value

    def __getitem__(self, index):
        if isinstance(index, slice):
            first, stop, step = index.indices(len(self))
            if step != 1:
                self._log.read(self._offset + first, self._offset + stop, f"x.tolist()[{index}]")
                return list.__getitem__(self, index)
            return _ListRecorder(list.__getitem__(self, index), self._log, self._offset + first)
        value = list.__getitem__(self, index)
        i = int(index) + (len(self) if int(index) < 0 else 0)
        self._log.read(self._offset + i, self._offset + i + 1, f"x.tolist()[{i}]")
        return value


def _method(name: str):
    def method(self, *args, **kwargs):
        return getattr(self._whole(f"x.{name}()"), name)(*args, **kwargs)
    method.__name__ = name
    return method


_METADATA_ONLY = {np.result_type, np.shape, np.ndim, np.size, np.iscomplexobj, np.isrealobj,
                  np.empty_like, np.zeros_like, np.ones_like, np.can_cast, np.min_scalar_type}
_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "pow": "**", "matmul": "@",
            "floordiv": "//", "mod": "%", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==",
            "ne": "!=", "neg": "-x", "pos": "+x", "abs": "abs(x)"}


def _operator(name: str):
    bare = name.strip("_").removeprefix("r") if name.startswith("__r") else name.strip("_")
    symbol = _SYMBOLS.get(bare, bare)
    how = symbol if "x" in symbol else f"x {symbol} ..."

    def op(self, *args):
        return getattr(self._whole(how), name)(*args)
    op.__name__ = name
    return op


for _name in ("max", "min", "sum", "mean", "argmax", "argmin", "cumsum", "reshape", "prod", "std",
              "var", "any", "all", "clip", "round", "view", "dot", "sort", "searchsorted",
              "nonzero", "tobytes"):
    setattr(ReadRecorder, _name, _method(_name))
for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__pow__", "__rpow__", "__neg__", "__pos__",
              "__abs__", "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__",
              "__matmul__", "__rmatmul__", "__floordiv__", "__mod__"):
    setattr(ReadRecorder, _name, _operator(_name))
ReadRecorder.T = property(lambda self: self._whole("x.T").T)
ReadRecorder.__hash__ = None
del _name


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
        _LIVE.append(obj)
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
        reads = func not in _METADATA_ONLY
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
_METADATA_ONLY |= {np.full_like}


def _warm_up() -> None:
    """Run the recorders' machinery once at import, before any measured call: its first use
    imports and caches (numpy's ctypes helpers, the ufunc override path) about 30 KB that
    tracemalloc would count against the first recorded call."""
    a = RowRecorder(np.ones((4, 2)), "float64", "warm-up")
    b = ReadRecorder(np.ones(4))
    np.exp(a[:2] @ a[2:].T).sum()
    np.dot(np.ones(2), a.T)
    np.einsum("i,ji->j", np.ones(2), a[1:3])
    np.split(a, 2)[0].astype(np.float32)
    (b.copy() - b.max()).tolist()
    collect()


_warm_up()
