"""Bounds-checked loads and stores under Triton's interpreter (probes opts `bounds`).

Under TRITON_INTERPRET=1 every tl.load and tl.store goes through Triton's InterpreterBuilder,
which reads and writes raw addresses. Here each access is checked lane by lane against the
memory the call may touch:
  - the input tensors built by the probes: their own elements only, not the poison behind them;
  - every tensor allocated during the call (seen by a dispatch mode) and every tensor passed to a
    launch: its whole storage.
A lane outside all of them is switched off before it touches memory (a load returns `other`, a
store writes nothing) and recorded with the line of the student's code that made the access and
the tensor it ran past. So a load or store past the end is caught the same way on every run,
even when a later tl.where hides the value, and never corrupts the worker's heap.

Stores into tensors allocated during the call are tracked element by element, so the trusted
side can tell "never written" (no store reached the element) from "written with NaN".

In the student's worker this is evidence for nothing: student code can reach these hooks and
their records (gc, closures, sys.modules). The bounds verdict is judged on the record the same
hooks make in the replay worker (grader.judge.evidence.provenance), which runs none of the student's host
code; the worker imports this module before any student code runs (grader.worker.probes).
"""

from __future__ import annotations

import contextlib
import linecache
import os
import sys

import numpy as np

_SKIP_DIRS = tuple(os.sep + d + os.sep for d in ("triton", "torch", "numpy", "grader"))


class _Memory:
    def __init__(self, inputs: list):
        # (start, end, label, track) ; label: {"arg": i} or {"alloc": op} or {"launch": True}
        self.ranges: list = []
        self.known_storages: set = set()
        self.stored: dict = {}      # storage start -> [numel, elsize, bool array, nan count, dtype]
        self.records: dict = {}
        for i, t in enumerate(inputs):
            es = t.element_size()
            extent = sum((s - 1) * st for s, st in zip(t.shape, t.stride())) + 1 if t.numel() else 0
            start = t.data_ptr()
            self.ranges.append((start, start + extent * es, {"arg": i}))
            self.known_storages.add(t.untyped_storage().data_ptr())

    def add_storage(self, t, label: dict, track: bool) -> None:
        try:
            storage = t.untyped_storage()
            start = storage.data_ptr()
        except Exception:   # noqa: BLE001 - meta/sparse tensors have no storage to check
            return
        if start in self.known_storages or start == 0:
            return
        self.known_storages.add(start)
        nbytes = storage.nbytes()
        self.ranges.append((start, start + nbytes, label))
        if track:
            es = t.element_size()
            self.stored[start] = [nbytes // es, es, np.zeros(nbytes // es, dtype=bool), 0, str(t.dtype)]

    # ------------------------------------------------------------------ checking one access

    def check(self, access: str, ptrs, mask, elsize: int, values=None):
        """(lanes that may go ahead, whether any was refused). One access belongs to one
        tensor: the one holding its lowest active address (else the one most of its lanes fall
        in). A lane outside that tensor is refused even if it lands in another tensor of the
        call, which is where memory past the end often is (the next allocation)."""
        addrs = np.asarray(ptrs.data).astype(np.uint64)
        m = np.broadcast_to(np.asarray(mask.data, dtype=bool), addrs.shape)
        owner = np.full(addrs.shape, -1, dtype=np.int64)
        for i, (start, end, label) in enumerate(self.ranges):
            if values is not None and "arg" in label:
                continue   # the inputs are read-only: a store into one is refused too
            owner[(addrs >= start) & (addrs + elsize <= end)] = i
        active = owner[m]
        if active.size == 0:
            return m, False
        low = int(np.argmin(addrs[m]))
        ref = int(active[low])
        if ref < 0:
            known = active[active >= 0]
            ref = int(np.bincount(known).argmax()) if known.size else -1
        ok = m & (owner == ref) if ref >= 0 else np.zeros_like(m)
        bad = m & ~ok
        if bad.any():
            self._record(access, addrs[bad], elsize, ref)
        if values is not None:
            self._track_store(addrs[ok], np.broadcast_to(np.asarray(values), addrs.shape)[ok])
        return ok, bool(bad.any())

    def _track_store(self, addrs, vals) -> None:
        for start, entry in self.stored.items():
            numel, es, written, _, _ = entry
            sel = (addrs >= start) & (addrs < start + numel * es)
            if sel.any():
                idx = ((addrs[sel] - start) // es).astype(np.int64)
                written[idx] = True
                v = vals[sel]
                if v.dtype.kind == "f":
                    entry[3] += int(np.isnan(v).sum())

    def _record(self, access: str, bad_addrs, elsize: int, ref: int) -> None:
        past, label = 0, {"unknown": True}
        low, high = int(bad_addrs.min()), int(bad_addrs.max())
        if ref < 0:   # no lane in a tensor it may touch: name the one it ran past
            below = [i for i, (_, end, _) in enumerate(self.ranges) if end <= low + elsize]
            ref = max(below, key=lambda i: self.ranges[i][1]) if below else -1
        if ref >= 0:
            start, end, label = self.ranges[ref]
            if high >= end:
                past = (high - end) // elsize + 1
        inside = [lab for s0, e0, lab in self.ranges if "arg" in lab and s0 <= low < e0]
        if access != "tl.load" and inside:
            label = {**inside[0], "into": True}
        line, code = _student_line()
        key = (access, line, repr(label))
        rec = self.records.setdefault(key, {"access": access, "line": line, "code": code,
                                            "tensor": label, "lanes": 0, "past": 0})
        rec["lanes"] += int(bad_addrs.size)
        rec["past"] = max(rec["past"], int(past))

    def allocations(self) -> list:
        out = []
        for numel, _es, written, nans, dtype in self.stored.values():
            unstored = np.flatnonzero(~written)
            out.append({"numel": int(numel), "dtype": dtype, "unstored": int(unstored.size),
                        "first_unstored": int(unstored[0]) if unstored.size else -1,
                        "stored_nan": int(nans)})
        return out


def _student_line() -> tuple:
    """(file:line, source line) of the innermost frame in the student's code."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.endswith(".py") and not any(d in name for d in _SKIP_DIRS) and "<" not in name:
            code = linecache.getline(name, frame.f_lineno).strip()
            return f"{os.path.basename(name)}:{frame.f_lineno}", code
        frame = frame.f_back
    return "?", ""


@contextlib.contextmanager
def checked(extras: dict, inputs: list):
    """Bounds-check every interpreted load/store during the block (see the module doc)."""
    try:
        import triton.runtime.interpreter as interp

        from grader.worker.tracing import dispatch_mode
        mode = dispatch_mode()
    except ImportError:
        yield
        return
    mem = _Memory(inputs)
    builder = interp.InterpreterBuilder
    saved = {name: getattr(builder, name) for name in
             ("create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas")}
    saved_run = interp.InterpretedFunction.run

    def elsize(ptrs) -> int:
        return max(1, ptrs.get_element_ty().primitive_bitwidth // 8)

    # The leading arguments are the same in every Triton release the lab runs on (3.6 to 3.9);
    # the cache and eviction arguments after them differ (positional in 3.6, keywords from the
    # 3.9 descriptor path), so they pass through as they come.
    def masked_load(self, ptrs, mask, other, *rest, **kw):
        ok, bad = mem.check("tl.load", ptrs, mask, elsize(ptrs))
        if bad:
            mask = interp.TensorHandle(ok, mask.dtype)
        return saved["create_masked_load"](self, ptrs, mask, other, *rest, **kw)

    def masked_store(self, ptrs, value, mask, *rest, **kw):
        ok, bad = mem.check("tl.store", ptrs, mask, elsize(ptrs), values=value.data)
        if bad:
            mask = interp.TensorHandle(ok, mask.dtype)
        return saved["create_masked_store"](self, ptrs, value, mask, *rest, **kw)

    def atomic_rmw(self, rmwOp, ptr, val, mask, *rest, **kw):
        ok, bad = mem.check("tl.atomic", ptr, mask, elsize(ptr), values=val.data)
        if bad:
            mask = interp.TensorHandle(ok, mask.dtype)
        return saved["create_atomic_rmw"](self, rmwOp, ptr, val, mask, *rest, **kw)

    def atomic_cas(self, ptr, cmp, val, *rest, **kw):
        ones = interp.TensorHandle(np.ones(np.shape(ptr.data), dtype=bool), interp.tl.int1)
        _, bad = mem.check("tl.atomic_cas", ptr, ones, elsize(ptr))
        if bad:
            raise RuntimeError("tl.atomic_cas outside every tensor of the call")
        return saved["create_atomic_cas"](self, ptr, cmp, val, *rest, **kw)

    def run(self, *args, **kwargs):
        for a in (*args, *kwargs.values()):
            base = getattr(a, "base", None) if not hasattr(a, "data_ptr") else a
            if base is not None and hasattr(base, "untyped_storage"):
                mem.add_storage(base, {"launch": getattr(self, "__name__", "kernel")}, track=False)
        return saved_run(self, *args, **kwargs)

    class Allocations(mode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = str(func.overloadpacket.__name__)
            for t in (out if isinstance(out, (list, tuple)) else (out,)):
                if type(t).__name__ == "Tensor" and t.device.type == "cpu":
                    mem.add_storage(t, {"alloc": name}, track=True)
            return out

    builder.create_masked_load = masked_load
    builder.create_masked_store = masked_store
    builder.create_atomic_rmw = atomic_rmw
    builder.create_atomic_cas = atomic_cas
    interp.InterpretedFunction.run = run
    try:
        with Allocations():
            yield
    finally:
        for name, fn in saved.items():
            setattr(builder, name, fn)
        interp.InterpretedFunction.run = saved_run
        extras["out_of_bounds"] = list(mem.records.values())
        extras["allocations"] = mem.allocations()
