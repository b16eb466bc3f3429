"""How values cross the trust boundary: JSON plus raw array bytes, never pickle.

Unpickling data from a process that ran student code would let that code run in the trusted
process, so everything the worker sends back is decoded from plain JSON and raw buffers with a
whitelisted dtype. One message is one `send_bytes` of a JSON header followed by one `send_bytes`
per buffer.

Values that can cross, by exact type (a subclass is refused, never converted: reading it could
run its code): None, bool, int, float, str, list, tuple, dict with str keys, NumPy arrays and
scalars, and (worker to trusted side) torch tensors, which arrive as `TensorValue`.
Trusted side to worker, two markers ask the worker to build something before the call:
`TensorArg` (a torch tensor on a device, optionally followed in memory by poison) and `Trusted`
(an object from `grader.worker.workloads`, e.g. a workload of known duration).
"""

from __future__ import annotations

import gc
import json
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# dtypes allowed in raw buffers; anything else is refused when decoding
_NUMPY_DTYPES = {
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
}
# torch dtypes that can cross, and the NumPy dtype their bytes travel as
_TORCH_WIRE = {
    "float16": "float16", "float32": "float32", "float64": "float64", "bfloat16": "uint16",
    "int32": "int32", "int64": "int64", "int8": "int8", "uint8": "uint8", "bool": "bool",
    "int16": "int16",
}
MAX_DEPTH = 32
MAX_HEADER_BYTES = 16 << 20     # the JSON part of one message
MAX_MESSAGE_BYTES = 1 << 30     # all parts of one message (a (1, 32, 16384, 128) fp16 output is 128 MiB)
MAX_ITEMS = 1 << 20             # items of one list, tuple or dict: bulk data travels as arrays
INT_LIMIT = 1 << 64             # integers cross as JSON numbers; nothing the grader asks for is larger


class CodecError(Exception):
    """A value that cannot cross the boundary (an arbitrary object, a bad header)."""


@dataclass
class TensorArg:
    """Trusted side → worker: build a torch tensor from `array`.

    dtype: torch dtype name ("float16", "bfloat16", "float32" ...); `array` holds the values
    (any float dtype; bfloat16 values are rounded by torch on the worker side).
    guard: number of poison elements placed right after the tensor in the same allocation, so
    an unmasked load past the end reads poison instead of whatever happened to be there.
    """

    array: np.ndarray | None
    dtype: str = "float32"
    device: str = "cpu"
    guard: int = 0
    poison: float = float("nan")
    # array=None: the worker draws the values itself with `inputs.torch_randn(shape, seed, scale)`,
    # which the trusted side repeats exactly; real GPU sizes then need no transfer
    shape: tuple | None = None
    seed: int | None = None
    scale: float = 1.0
    absolute: bool = False     # |randn| * scale: a sign for every value (e.g. all scores < 0)
    # 2-D only: each row is followed by `pad_cols` poison elements, so the tensor is a column
    # slice of a wider one (x.stride(0) = cols + pad_cols), like x[:, :500] of a (rows, 781)
    pad_cols: int = 0
    # with `array`: the worker keeps the values under this key (grader.worker.probes), and a
    # marker with the same key and no array, nor seed, is built from them: a timed request's
    # array crosses once per grader.judge.perf.timed_requests.Requests, not once per request
    kept: str = ""


@dataclass
class Trusted:
    """Trusted side → worker: an object made by `grader.worker.workloads.make(name, **params)`.

    Markers with the same `key` in one call share one instance; `attr` picks an attribute of it
    (e.g. the workload's `synchronize`).
    """

    name: str
    key: str = ""
    attr: str | None = None
    params: dict = field(default_factory=dict)


@dataclass
class TensorValue:
    """Worker → trusted side: a torch tensor the student returned, as NumPy plus metadata.

    `array` is the values (bfloat16 widened exactly to float32); `dtype` is torch's name.
    """

    array: np.ndarray
    dtype: str
    device: str
    shape: tuple
    stride: tuple

    def __repr__(self) -> str:  # short: reports must not dump tensors
        return f"tensor(shape={self.shape}, dtype={self.dtype}, device={self.device})"


# ---------------------------------------------------------------------------------- encoding


def encode(value: Any, markers: bool = True) -> list[bytes]:
    """Value → [header, buffer, buffer, ...]. Anything that cannot cross raises CodecError with
    the reason (too deep, too large, an object): never another exception. `markers`: TensorArg
    and Trusted may cross (the trusted side's requests; the worker's replies carry none).

    No garbage is collected while the value is read: the encoder's own allocations would
    otherwise start a collection, and run the __del__ or gc callbacks of the sender's garbage
    in the middle of the value (in the worker, student code that could rewrite it)."""
    collecting = gc.isenabled()
    gc.disable()
    buffers: list[bytes] = []
    try:
        header = json.dumps(_enc(value, buffers, 0, markers)).encode()
    except CodecError:
        raise
    except RecursionError:
        raise CodecError("value nested too deeply") from None
    except MemoryError:
        raise CodecError("value too large to send") from None
    except Exception as e:  # noqa: BLE001 - a tensor torch cannot copy to the host ...
        raise CodecError(f"cannot send this value ({_name(type(e))}: {str(e)[:200]})") from None
    finally:
        if collecting:
            gc.enable()
    size = len(header) + sum(len(b) for b in buffers)
    if len(header) > MAX_HEADER_BYTES or size > MAX_MESSAGE_BYTES:
        raise CodecError(f"value too large to send ({size / 2**20:.0f} MiB; the limit is "
                         f"{MAX_MESSAGE_BYTES >> 20} MiB, with at most {MAX_HEADER_BYTES >> 20} MiB "
                         f"outside arrays)")
    return [header] + buffers


# The encoder reads values by their exact type and calls nothing of theirs: a subclass of list,
# tuple, dict, str, a number, an ndarray or a tensor could run code while it is read (__len__,
# __iter__, __float__, a dtype property), after the probes of the call have closed, so it is
# refused by name; nothing is converted. Its message names the type found, read through
# type's own descriptor (a metaclass could make `__name__` run code too).
_PLAIN = (type(None), bool, int, float, str)
_SCALARS = {np.dtype(name).type for name in _NUMPY_DTYPES}   # np.float32, np.int64, np.bool_ ...
_BASES = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (list, "list"),
          (tuple, "tuple"), (dict, "dict"), (np.ndarray, "NumPy array"),
          (np.generic, "NumPy scalar"))
_TYPE_NAME = type.__dict__["__name__"]


def _name(cls: type) -> str:
    return str.__str__(_TYPE_NAME.__get__(cls, type))


def _refuse(v: Any) -> CodecError:
    cls = type(v)
    exact = ("the grader reads exact types only: a plain list, tuple, dict with str keys, NumPy "
             "array, torch.Tensor or number")
    torch = sys.modules.get("torch")
    bases = _BASES + (((torch.Tensor, "torch.Tensor"),) if torch is not None else ())
    for base, what in bases:
        if issubclass(cls, base):   # type's own check on the class: no code of the value's runs
            return CodecError(f"a {_name(cls)}, a subclass of {what}, whose methods could run "
                              f"while it is read ({exact})")
    return CodecError(f"a value of type {_name(cls)} ({exact})")


def _enc(v: Any, bufs: list[bytes], depth: int, markers: bool) -> Any:
    if depth > MAX_DEPTH:
        raise CodecError("value nested too deeply")
    cls = type(v)
    if cls in _PLAIN:
        if cls is int and not -INT_LIMIT < v < INT_LIMIT:
            raise CodecError(f"an integer of {v.bit_length()} bits cannot be returned (at most 64 "
                             f"bits cross the boundary)")
        if cls is float and (v != v or v in (float("inf"), float("-inf"))):
            return {"__float__": repr(v)}
        return v
    if cls is np.float64:   # a float subclass, but NumPy's own: it crosses as a float
        return _enc(float.__float__(v), bufs, depth, markers)
    if cls in (list, tuple, dict) and len(v) > MAX_ITEMS:
        raise CodecError(f"value too large to send: a {cls.__name__} of {len(v)} items (return "
                         f"an array instead)")
    if cls is list or cls is tuple:
        items = [_enc(x, bufs, depth + 1, markers) for x in v]
        return {"__tuple__": items} if cls is tuple else items
    if cls is dict:
        for k in v:
            if type(k) is not str:
                raise CodecError(f"dict keys must be plain strings, not {_refuse(k)}")
        return {"__dict__": [[k, _enc(x, bufs, depth + 1, markers)] for k, x in v.items()]}
    if cls in _SCALARS:
        return {"__npscalar__": _enc(np.asarray(v), bufs, depth + 1, markers)}
    if cls is np.ndarray:
        if v.dtype.name not in _NUMPY_DTYPES:
            raise CodecError(f"arrays of dtype {v.dtype} cannot be returned")
        bufs.append(np.ascontiguousarray(v).tobytes())
        return {"__ndarray__": len(bufs) - 1, "dtype": v.dtype.name, "shape": list(v.shape)}
    if cls is TensorArg and markers:
        common = {"dtype": v.dtype, "device": v.device, "guard": int(v.guard),
                  "poison": _enc(float(v.poison), bufs, depth + 1, markers),
                  "pad_cols": int(v.pad_cols), "kept": str(v.kept)}
        if v.array is None and v.seed is None and v.kept:
            return {"__tensorarg__": -2, **common}
        if v.array is None:
            return {"__tensorarg__": -1, "shape": [int(n) for n in v.shape], "seed": int(v.seed),
                    "scale": float(v.scale), "absolute": bool(v.absolute), **common}
        arr = np.ascontiguousarray(v.array)
        bufs.append(arr.tobytes())
        return {"__tensorarg__": len(bufs) - 1, "array_dtype": arr.dtype.name,
                "shape": list(arr.shape), **common}
    if cls is Trusted and markers:
        return {"__trusted__": v.name, "key": v.key, "attr": v.attr,
                "params": _enc(v.params, bufs, depth + 1, markers)}
    torch = sys.modules.get("torch")
    if torch is not None and cls is torch.Tensor:
        return _enc_torch(v, bufs, torch)
    if torch is not None and cls is torch.dtype:
        return {"__torchdtype__": str(v).replace("torch.", "")}
    raise _refuse(v)


def _enc_torch(t, bufs: list[bytes], torch) -> dict:
    # an exact tensor has no Python of its own, but a mode the call left on the stack
    # (TorchFunctionMode, TorchDispatchMode; torch.set_default_device is one) would run on
    # every op below: both are switched off while it is read
    with torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch():
        name = str(t.dtype).replace("torch.", "")
        if name not in _TORCH_WIRE:
            raise CodecError(f"tensors of dtype {t.dtype} cannot be returned")
        host = t.detach().to("cpu").contiguous()
        if name == "bfloat16":
            host = host.view(torch.int16)
        bufs.append(host.numpy().tobytes())
        return {"__tensor__": len(bufs) - 1, "dtype": name, "device": str(t.device),
                "shape": list(t.shape), "stride": list(t.stride())}


# ---------------------------------------------------------------------------------- decoding


def decode(parts: list[bytes], build=None) -> Any:
    """[header, buffers...] → value. `build(marker_dict, buffer)` makes TensorArg/Trusted
    objects on the worker side; the trusted side passes None and gets the marker objects."""
    try:
        header = json.loads(parts[0].decode())
        return _dec(header, parts[1:], build, 0)
    except CodecError:
        raise
    except RecursionError:
        raise CodecError("value nested too deeply") from None
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, AttributeError) as e:
        raise CodecError(f"unreadable message ({type(e).__name__}: {str(e)[:200]})") from None


def _array(buf: bytes, dtype: str, shape: list) -> np.ndarray:
    if dtype not in _NUMPY_DTYPES:
        raise CodecError(f"refused dtype {dtype!r}")
    shape = tuple(int(s) for s in shape)
    arr = np.frombuffer(buf, dtype=dtype)
    if arr.size != int(np.prod(shape, dtype=np.int64)):
        raise CodecError("array size does not match its shape")
    return arr.reshape(shape).copy()


def _dec(h: Any, bufs: list[bytes], build, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise CodecError("value nested too deeply")
    if h is None or isinstance(h, (bool, int, float, str)):
        return h
    if isinstance(h, list):
        return [_dec(x, bufs, build, depth + 1) for x in h]
    if not isinstance(h, dict) or len(h) == 0:
        raise CodecError("malformed value")
    if "__float__" in h:
        return float(h["__float__"])
    if "__tuple__" in h:
        return tuple(_dec(x, bufs, build, depth + 1) for x in h["__tuple__"])
    if "__dict__" in h:
        return {str(k): _dec(x, bufs, build, depth + 1) for k, x in h["__dict__"]}
    if "__npscalar__" in h:
        return _dec(h["__npscalar__"], bufs, build, depth + 1)[()]
    if "__ndarray__" in h:
        return _array(bufs[h["__ndarray__"]], h["dtype"], h["shape"])
    if "__tensor__" in h:
        dtype = str(h["dtype"])
        if dtype not in _TORCH_WIRE:
            raise CodecError(f"refused tensor dtype {dtype!r}")
        arr = _array(bufs[h["__tensor__"]], _TORCH_WIRE[dtype], h["shape"])
        if dtype == "bfloat16":  # widen exactly: bf16 is the top half of a float32
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        return TensorValue(arr, dtype, str(h["device"]), tuple(h["shape"]), tuple(h["stride"]))
    if "__torchdtype__" in h:
        return "torch." + str(h["__torchdtype__"])
    if "__tensorarg__" in h:
        poison = _dec(h["poison"], bufs, None, 0)
        kept = str(h.get("kept", ""))[:64]
        if h["__tensorarg__"] == -2:
            marker = TensorArg(None, h["dtype"], h["device"], h["guard"], poison)
        elif h["__tensorarg__"] == -1:
            marker = TensorArg(None, h["dtype"], h["device"], h["guard"], poison,
                               tuple(h["shape"]), int(h["seed"]), float(h["scale"]),
                               bool(h.get("absolute", False)))
        else:
            arr = _array(bufs[h["__tensorarg__"]], h["array_dtype"], h["shape"])
            marker = TensorArg(arr, h["dtype"], h["device"], h["guard"], poison)
        marker.pad_cols, marker.kept = int(h.get("pad_cols", 0)), kept
        return build(marker) if build else marker
    if "__trusted__" in h:
        marker = Trusted(h["__trusted__"], h["key"], h["attr"], _dec(h["params"], bufs, None, 0))
        return build(marker) if build else marker
    raise CodecError("malformed value")
