"""`ReadRecorder`: a 1-D float array stand-in that logs every read of it, in passes, for the
`online_max_sum` check "one pass over x"; with keep_shape=True it keeps a 2-D shape, and its
reads are ranges of rows (attention_backward's block skipping: which key rows a block of queries
read). Every read of a call also goes, in order, into `ranges` ([sequence, start, stop], the
sequence shared by the call's recorders).

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
"""

from __future__ import annotations

import numpy as np

from grader.worker.recorders import LIVE, METADATA_ONLY, collect

_SEQ = [0]          # the order of reads across the call's recorders
_MAX_RANGES = 4096  # reads kept in order per recorder (element-wise passes make many)


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
            LIVE.append(self)
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
        looks = func in METADATA_ONLY   # np.result_type(x, ...), np.shape(x): no values read

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


def _warm_up() -> None:
    """Run the recorder's machinery once at import, before any measured call, so that what its
    first use imports and caches is not counted by tracemalloc against the first recorded call
    (grader.worker.row_recorder warms up its own)."""
    b = ReadRecorder(np.ones(4))
    (b.copy() - b.max()).tolist()
    collect()


_warm_up()
