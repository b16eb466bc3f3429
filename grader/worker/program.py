"""The program of one gated call: every storage it touched and the steps that made them.

Recorded in the worker by `grader.worker.probes.trace` (the same TorchDispatchMode that lists the
aten ops, and the same wrapper of Triton's launch entry points), sent back in extras["program"]
and judged by the trusted side (grader.judge.evidence.provenance), which REPLAYS it in a clean worker
holding only the submission's @triton.jit functions and compares the replayed outputs with what
the call returned. So nothing recorded here has to be honest: a program that leaves a step out,
or names a tensor it did not make, replays to a different answer.

    {"inputs": [[sid, input index], ...],           storages of the call's inputs
     "steps": [{"op": "aten.empty.memory_format", "args": [...], "kwargs": {...}, "out": [ref]},
               {"launch": "softmax_kernel", "module": "softmax_triton", "grid": [4, 1, 1],
                "args": {"out_ptr": ref, "n_cols": 781, "BLOCK": 1024},
                "options": {"num_warps": 4}}, ...],
     "outputs": [ref, ...],                           the tensors of the returned value, in order
     "unknown": [{"sid": 7, "where": "..."}],         storages no step made and no input holds
     "overflow": "..."}                               set when the call made too many steps

A tensor is a ref {"t": [sid, storage_offset, shape, stride, dtype]}; other values are plain
(int, float, bool, None, str) or tagged ({"dtype": "float16"}, {"device": "cpu"}, a host-side
TensorDescriptor as {"desc": {"base": ref, "shape", "strides", "block_shape", ...}}, and
{"?": type} for anything else, which the trusted side refuses).
"""

from __future__ import annotations

import functools
import inspect

MAX_STEPS = 4096          # a wrapper allocates and launches a handful; a loop of ops is not one
MAX_LAUNCHES = 512
MAX_SEQUENCE = 16         # items of a list argument kept (shapes, strides); more is refused


class Program:
    """What one call did, as the trusted side can replay it. `keep` holds every storage seen,
    so none is freed and its address reused by another during the call (which would merge two
    storages under one id)."""

    def __init__(self, inputs: list):
        self.steps: list = []
        self.unknown: list = []
        self.overflow = ""
        self.outputs: list = []
        self.launches = 0
        self._sid: dict = {}        # storage address -> storage id
        self.keep: list = []
        self.inputs = []
        for i, view in enumerate(inputs):
            self.inputs.append([self._new(view), i])

    # ------------------------------------------------------------------ storages and refs

    def _new(self, t) -> int:
        storage = t.untyped_storage()
        sid = len(self.keep)
        self._sid[storage._cdata] = sid
        self.keep.append(storage)
        return sid

    def ref(self, t, where: str) -> dict:
        """The ref of a tensor: a storage seen before, or one of unknown origin (recorded)."""
        key = t.untyped_storage()._cdata
        sid = self._sid.get(key)
        if sid is None:
            sid = self._new(t)
            if len(self.unknown) < 8:
                self.unknown.append({"sid": sid, "where": where[:200]})
        return self._describe(t, sid)

    @staticmethod
    def _describe(t, sid: int) -> dict:
        return {"t": [sid, int(t.storage_offset()), [int(n) for n in t.shape],
                      [int(s) for s in t.stride()], str(t.dtype).replace("torch.", "")]}

    def value(self, v, where: str, depth: int = 0):
        """An operand as plain data: tensors as refs, torch's enums tagged."""
        name = type(v).__name__
        if name in ("Tensor", "Parameter"):
            return self.ref(v, where)
        if v is None or isinstance(v, (bool, int, float, str)):
            return v if not isinstance(v, str) else str.__str__(v)[:64]
        if isinstance(v, (list, tuple)) and depth < 2 and len(v) <= MAX_SEQUENCE:
            return [self.value(x, where, depth + 1) for x in v]
        if name == "dtype":
            return {"dtype": str(v).replace("torch.", "")}
        if name == "device":
            return {"device": str(v)}
        if name == "layout":
            return {"layout": str(v).replace("torch.", "")}
        if name == "memory_format":
            return {"memory_format": str(v).replace("torch.", "")}
        if name == "constexpr":
            return self.value(getattr(v, "value", None), where, depth)
        if name == "TensorDescriptor":   # triton.tools.tensor_descriptor: a tensor and its tiling
            fields = ("shape", "strides", "block_shape", "padding", "round_f32_to_tf32")
            return {"desc": {"base": self.value(getattr(v, "base", None), where, depth + 1),
                             **{f: self.value(getattr(v, f, None), where, depth + 1)
                                for f in fields if hasattr(v, f)}}}
        return {"?": name[:40]}

    # ------------------------------------------------------------------ steps

    def _room(self) -> bool:
        if len(self.steps) >= MAX_STEPS or self.launches > MAX_LAUNCHES:
            self.overflow = (f"more than {MAX_STEPS} torch ops or {MAX_LAUNCHES} launches in one "
                             f"call")
            return False
        return True

    def op(self, func, args, kwargs, out) -> None:
        """A torch op that ran outside any launch: its operands, then its outputs (a storage
        none of its operands holds is new: made by this step)."""
        if not self._room():
            return
        name = f"{func.namespace}.{func._schema.name.split('::')[-1]}.{func._overloadname}"
        where = f"torch op {name}"
        step = {"op": name, "args": [self.value(a, where) for a in args],
                "kwargs": {str(k): self.value(v, where) for k, v in (kwargs or {}).items()}}
        outs = []
        for t in _tensors(out):
            key = t.untyped_storage()._cdata
            sid = self._sid.get(key)
            if sid is None:
                sid = self._new(t)
            outs.append(self._describe(t, sid))
        step["out"] = outs
        self.steps.append(step)

    def launch(self, kernel, args: tuple, kwargs: dict) -> None:
        """A Triton launch as the launch itself used it: every argument bound to its name (after
        an autotuner or heuristics added theirs), the grid resolved, the launch options."""
        self.launches += 1
        if not self._room():
            return
        fn = getattr(kernel, "fn", None)
        name = str(getattr(fn, "__name__", "?"))[:100]
        where = f"launch of {name}"
        try:
            params, named = _bind(fn, args, kwargs)
        except (TypeError, ValueError) as e:
            self.steps.append({"launch": name, "error": f"arguments could not be bound: {e}"[:300]})
            return
        grid = kwargs.get("grid")
        try:
            grid = grid(named) if callable(grid) else grid
            grid = [int(g) for g in grid] + [1] * (3 - len(grid))
        except Exception as e:  # noqa: BLE001 - the student's grid function
            grid = {"?": f"grid could not be resolved: {type(e).__name__}"}
        self.steps.append({
            "launch": name, "module": str(getattr(fn, "__module__", "?"))[:100], "grid": grid,
            "args": {str(k): self.value(v, f"{where} (argument {k!r})") for k, v in named.items()},
            "options": {str(k): self.value(v, where) for k, v in kwargs.items()
                        if k not in params and k not in ("grid", "warmup")}})

    def set_outputs(self, value) -> None:
        self.outputs = [self.ref(t, "the returned value") for t in _tensors(value, depth_limit=4)]

    def record(self) -> dict:
        """The program as codec-encodable plain data; the storages it kept are released."""
        self.keep.clear()
        out = {"inputs": self.inputs, "steps": self.steps, "outputs": self.outputs,
               "unknown": self.unknown}
        if self.overflow:
            out["overflow"] = self.overflow
        return out


@functools.lru_cache(maxsize=256)
def _parameters(fn) -> tuple[inspect.Signature, bool, dict]:
    """A kernel's signature, once per kernel (a timed call launches the same kernels every call);
    whether every parameter can be passed by position or name (a @triton.jit function's always
    can), and the defaults."""
    sig = inspect.signature(fn)
    plain = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in sig.parameters.values())
    return sig, plain, {k: p.default for k, p in sig.parameters.items() if p.default is not p.empty}


def _bind(fn, args: tuple, kwargs: dict) -> tuple[dict, dict]:
    """(the kernel's parameters, every argument of the launch by name, defaults filled in), as
    inspect.Signature.bind gives them (its TypeError too), without its per-call work for the
    plain signatures of @triton.jit functions."""
    sig, plain, defaults = _parameters(fn)
    params = sig.parameters
    given = {k: v for k, v in kwargs.items() if k in params}
    if not plain:
        bound = sig.bind(*args, **given)
        bound.apply_defaults()
        return params, dict(bound.arguments)
    if len(args) > len(params):
        raise TypeError("too many positional arguments")
    named = dict(zip(params, args))
    for k, v in given.items():
        if k in named:
            raise TypeError(f"multiple values for argument {k!r}")
        named[k] = v
    missing = [k for k in params if k not in named and k not in defaults]
    if missing:
        raise TypeError(f"missing a required argument: {missing[0]!r}")
    return params, {k: named[k] if k in named else defaults[k] for k in params}


def _tensors(value, depth_limit: int = 2, depth: int = 0) -> list:
    """The tensors of a value, in order (a tensor; a list, tuple or dict of them, nested)."""
    if type(value).__name__ in ("Tensor", "Parameter"):
        return [value]
    if depth >= depth_limit:
        return []
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v, depth_limit, depth + 1)]
    return []
