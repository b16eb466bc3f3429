"""Inputs that record how student code reads them, built inside the worker.

    Trusted("read_recorder", key="x", params={"values": x})   # the trusted side asks for one
    online_max_sum(x)                                          # the student reads it
    extras["reads"] == {"n": 1000, "passes": 1, "whole": 0, ...}

`ReadRecorder` is a 1-D float array stand-in for the `online_max_sum` check "one pass over x";
with keep_shape=True it keeps a 2-D shape, and its reads are ranges of rows (attention_backward's
block skipping: which key rows a block of queries read). Every read of a call also goes, in
order, into `ranges` ([sequence, start, stop], the sequence shared by the call's recorders).
Every read is a range of indices [start, stop):
  - a whole-array read (x.max(), np.exp(x), x - m, np.asarray(x), x.tolist()) reads [0, n);
  - x[i], iteration (for xi in x), and chunks (x[a:b] read any of those ways) read their range.
A new pass starts whenever a read goes back before where the previous read ended (reading the
element just read again, as `max(m, x[i])` then `exp(x[i] - m)` does, is not going back). So
element-wise iteration or chunk-wise reading in order is one pass, and `m = x.max()` followed by
`exp(x - m).sum()` is two.

What it cannot see: work done on a copy. `np.asarray(x)` is one whole read; whatever the code does
afterwards with the ndarray it got is invisible. The log lives in the worker, next to student
code, so it is evidence, not a verdict: the static audit flags imports of the grader and frame
inspection, the ways to reach it.
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
        return self._whole("x.tolist()").tolist()

    def __array__(self, dtype=None, copy=None):
        a = self._whole("np.asarray(x)")
        return a.astype(dtype) if dtype is not None else a.copy()

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = [i._whole(f"np.{ufunc.__name__}(x)") if isinstance(i, ReadRecorder) else i
                  for i in inputs]
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
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


for _name in ("max", "min", "sum", "mean", "argmax", "argmin", "cumsum", "copy", "ravel",
              "flatten", "reshape", "prod", "std", "var", "any", "all", "clip", "round", "view",
              "dot", "sort", "searchsorted", "nonzero", "tobytes"):
    setattr(ReadRecorder, _name, _method(_name))
for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__pow__", "__rpow__", "__neg__", "__pos__",
              "__abs__", "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__",
              "__matmul__", "__rmatmul__", "__floordiv__", "__mod__"):
    setattr(ReadRecorder, _name, _operator(_name))
ReadRecorder.T = property(lambda self: self._whole("x.T").T)
ReadRecorder.__hash__ = None
del _name
