"""What crosses the trust boundary is data, never code."""

from __future__ import annotations

import numpy as np
import pytest

from grader.wire import codec, framing


class Evil:
    def __reduce__(self):
        return (print, ("pwned",))


def roundtrip(value):
    return codec.decode(codec.encode(value))


def test_plain_values_roundtrip():
    value = {"a": [1, 2.5, None, True, "s"], "t": (float("inf"), float("nan")),
             "arr": np.arange(6, dtype=np.float16).reshape(2, 3), "scalar": np.float32(1.5)}
    back = roundtrip(value)
    assert back["a"] == value["a"] and back["t"][0] == float("inf") and back["t"][1] != back["t"][1]
    assert back["arr"].dtype == np.float16 and (back["arr"] == value["arr"]).all()
    assert back["scalar"] == np.float32(1.5)


@pytest.mark.parametrize("bad", [Evil(), object(), {1: 2}, np.array([object()]), lambda: 1])
def test_objects_are_refused(bad):
    with pytest.raises(codec.CodecError):
        codec.encode(bad)


def test_forged_headers_are_refused():
    with pytest.raises(codec.CodecError):
        codec.decode([b'{"__ndarray__": 0, "dtype": "object", "shape": [1]}', b"x" * 8])
    with pytest.raises(codec.CodecError):
        codec.decode([b'{"__pickle__": "gASV"}'])
    with pytest.raises(codec.CodecError):
        codec.decode([b'{"__ndarray__": 0, "dtype": "float32", "shape": [4]}', b"x" * 8])


def test_torch_tensors_arrive_as_values():
    torch = pytest.importorskip("torch")
    t = torch.tensor([[1.0, -2.5], [3.0, 1e-3]], dtype=torch.bfloat16)
    back = roundtrip(t)
    assert isinstance(back, codec.TensorValue) and back.dtype == "bfloat16" and back.shape == (2, 2)
    assert np.array_equal(back.array, t.float().numpy())


@pytest.mark.parametrize("bomb, words", [
    (10 ** 5000, "bits"),
    (2 ** 64, "bits"),
    (list(range(codec.MAX_ITEMS + 1)), "too large"),
], ids=["10**5000", "2**64", "long_list"])
def test_bombs_are_refused_with_a_reason(bomb, words):
    with pytest.raises(codec.CodecError, match=words):
        codec.encode(bomb)


def test_deep_nesting_is_refused_both_ways():
    deep = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(codec.CodecError, match="nested too deeply"):
        codec.encode(deep)
    with pytest.raises(codec.CodecError):   # a forged header: json's own recursion, or ours
        codec.decode([b"[" * 100_000 + b"]" * 100_000])
    with pytest.raises(codec.CodecError):
        codec.decode([b"1" * 5000])          # an integer too long for int()


# Each hook counts in RAN when it runs: the encoder reads exact types only, so a subclass is
# refused by name before any of its methods or properties is touched (issue 53)
RAN: list = []


def _hooked(base, *names, **props):
    """A subclass of `base` whose methods `names` and properties `props` count when run."""
    def method(name):
        def hook(self, *args, **kwargs):
            RAN.append(name)
            return getattr(base, name)(self, *args, **kwargs)
        return hook
    body = {name: method(name) for name in names}
    body.update({name: property(lambda self, v=value, n=name: RAN.append(n) or v)
                 for name, value in props.items()})
    return type(f"My{base.__name__.capitalize()}", (base,), body)


class _CountingMeta(type):
    @property
    def __name__(cls):
        RAN.append("metaclass __name__")
        return "Disguised"


class _Pretender(metaclass=_CountingMeta):
    """Claims to be a list to isinstance (its __class__), and names itself through a metaclass."""

    @property
    def __class__(self):
        RAN.append("__class__")
        return list


def _subclasses():
    seq = ("__len__", "__iter__", "__getitem__", "__reversed__")
    yield _hooked(list, *seq)([1.0, 2.0])
    yield _hooked(tuple, *seq)((1.0, 2.0))
    yield _hooked(dict, "__len__", "__iter__", "keys", "items", "values", "__getitem__")({"m": 1.0})
    yield _hooked(str, "__str__", "__len__", "__iter__", "encode", "__repr__")("m")
    yield _hooked(int, "__index__", "__int__", "__repr__", "bit_length", "__lt__", "__gt__")(3)
    yield _hooked(float, "__float__", "__repr__", "__ne__", "__eq__")(1.5)
    yield _hooked(np.float64, "__float__", "__repr__", "__array__")(1.5)
    arr = np.arange(4.0).view(_hooked(np.ndarray, "__array__", "tobytes", "__array_finalize__",
                                      "astype", "copy", dtype=np.dtype("float64"),
                                      shape=(4,), strides=(8,)))
    yield arr
    yield {"m": _hooked(float, "__float__", "__repr__")(1.0)}        # inside a plain dict
    yield (np.ones(2), [_hooked(list, *seq)([1])])                   # deep in a plain tuple
    yield {_hooked(str, "__hash__", "__eq__", "__str__")("m"): 1.0}   # a key
    yield _Pretender()


@pytest.mark.parametrize("value", list(_subclasses()),
                         ids=lambda v: type.__dict__["__name__"].__get__(type(v), type))
def test_subclasses_are_refused_without_running_them(value):
    RAN.clear()
    with pytest.raises(codec.CodecError, match="subclass of|exact types") as refused:
        codec.encode(value)
    assert RAN == [], f"the encoder ran {RAN} of a {refused.value}"


def test_torch_subclasses_and_modes_run_nothing():
    torch = pytest.importorskip("torch")
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Lazy(torch.Tensor):   # computes its answer whenever torch touches it
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            RAN.append(f"__torch_function__ {func}")
            return super().__torch_function__(func, types, args, kwargs or {})

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            RAN.append(f"function mode {func}")
            return func(*args, **(kwargs or {}))

    class Rewrite(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            RAN.append(f"dispatch mode {func}")
            return func(*args, **(kwargs or {}))

    RAN.clear()
    for value in (torch.ones(3).as_subclass(Lazy), torch.nn.Parameter(torch.ones(3))):
        with pytest.raises(codec.CodecError, match="subclass of torch.Tensor"):
            codec.encode(value)
    assert RAN == []
    t = torch.arange(12.0).reshape(3, 4).t()[1:]          # a strided view
    with Watch(), Rewrite():                               # left active by the call, as it were
        parts = codec.encode(t)
    assert RAN == []
    back = codec.decode(parts)
    assert back.shape == (3, 3) and np.array_equal(back.array, t.numpy())


def test_no_collection_while_the_value_is_read():
    """No garbage collection runs while the encoder reads a value: it would run the __del__ and
    gc callbacks (student code, in the worker) of garbage in the middle of the value."""
    import gc
    import sys

    def callback(phase, info):
        frame, names = sys._getframe(), set()
        while frame is not None:
            names.add(frame.f_code.co_name)
            frame = frame.f_back
        RAN.append("encoding" if "_enc" in names else "decoding" if "_dec" in names else "")

    value = [(float(i), [i]) for i in range(2000)]
    saved = gc.get_threshold()
    gc.callbacks.append(callback)
    try:
        gc.set_threshold(1)     # any allocation of a container may start one
        RAN.clear()
        codec.encode(value)
        codec.decode([b"[" + b"[1]," * 2000 + b"[1]]"])   # the decoder allocates too: a control
    finally:
        gc.set_threshold(*saved)
        gc.callbacks.remove(callback)
    assert "encoding" not in RAN and "decoding" in RAN, RAN


def test_honest_values_still_cross():
    """What the exercises return: arrays (views, non-contiguous, any allowed dtype), NumPy
    scalars (np.float64 arrives as a float, the others as themselves), bools, tuples (m, l),
    dicts of floats or None (bench_attn's probe and rows)."""
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    value = (base[:, 1::2], base.T, np.float64(2.5), np.float32(1.5), np.int64(7), np.bool_(True),
             True, {"MATH": 1.25, "FLASH_ATTENTION": None}, [dict(N=16, impl="sdpa", ms=0.5)])
    back = roundtrip(value)
    assert np.array_equal(back[0], base[:, 1::2]) and np.array_equal(back[1], base.T)
    assert type(back[2]) is float and back[2] == 2.5
    assert type(back[3]) is np.float32 and type(back[4]) is np.int64 and type(back[5]) is np.bool_
    assert back[6] is True and back[7] == value[7] and back[8] == value[8]


def test_markers_cross_only_when_asked():
    """TensorArg and Trusted are the trusted side's requests; the worker's replies carry none
    (their fields would be read with int() and float())."""
    with pytest.raises(codec.CodecError, match="TensorArg"):
        codec.encode({"x": codec.TensorArg(np.ones(2))}, markers=False)
    with pytest.raises(codec.CodecError, match="Trusted"):
        codec.encode([codec.Trusted("async_work")], markers=False)


def test_receive_refuses_oversized_messages():
    from multiprocessing import Pipe

    a, b = Pipe()
    a.send_bytes(b'{"parts": 2}')
    a.send_bytes(b'{"__ndarray__": 0, "dtype": "uint8", "shape": [100]}')
    a.send_bytes(b"x" * 100)
    with pytest.raises(codec.CodecError, match="larger than"):
        framing.recv(b, max_bytes=64)


def test_a_kept_array_crosses_once_and_later_markers_name_it():
    """A timed request's array argument (codec.TensorArg.kept): the first marker carries the
    values and the worker keeps them; a marker with the key alone is built from them, as a copy
    of its own (a call that writes into its input changes no later request's); a key the worker
    does not hold is the grader's error, not a tensor of anything."""
    import torch

    from grader.worker import call_inputs

    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    first = codec.TensorArg(values, "float16", "cpu", guard=2, kept="t-1")
    later = codec.TensorArg(None, "float16", "cpu", guard=2, kept="t-1")
    parts = codec.encode([first, later])
    assert len(parts) == 2                       # one buffer: the array crosses once
    sent = codec.decode(codec.encode(later))
    assert sent.array is None and sent.seed is None and sent.kept == "t-1"
    a, b = codec.decode(parts, build=call_inputs.build_marker)
    assert torch.equal(a, b) and a.dtype == torch.float16 and a.data_ptr() != b.data_ptr()
    a.add_(1)
    c = codec.decode(codec.encode(later), build=call_inputs.build_marker)
    assert torch.equal(c, b)
    call_inputs.forget_inputs()
    for k in range(call_inputs.KEPT_MAX):             # the oldest key goes first
        codec.decode(codec.encode(codec.TensorArg(values, "float32", kept=f"t-{k + 2}")),
                     build=call_inputs.build_marker)
    with pytest.raises(codec.CodecError, match="no input kept"):   # the worker: grader_error
        codec.decode(codec.encode(later), build=call_inputs.build_marker)
    call_inputs.forget_inputs()


def test_a_worker_refuses_a_subclass_before_its_hooks_run(tmp_path):
    """End to end: a list subclass whose __len__ and __iter__ would write a file (or compute the
    answer, or rewrite the extras) is a BadReturn, and neither ran in the worker."""
    from grader import errors
    from grader.sandbox.proxy import Submission

    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "online_softmax.py").write_text(
        "import os\n\n"
        "class Lazy(list):\n"
        "    def _mark(self):\n"
        "        open('hook-ran', 'w').close()\n"
        "    def __len__(self):\n"
        "        self._mark()\n"
        "        return 2\n"
        "    def __iter__(self):\n"
        "        self._mark()\n"
        "        return iter([0.5, 0.5])\n\n"
        "def softmax_safe(x):\n"
        "    return Lazy()\n")
    worker = Submission("online_softmax", sub, "cpu", tmp_path / "scratch")
    try:
        with pytest.raises(errors.BadReturn, match="a Lazy, a subclass of list"):
            worker.softmax_safe(np.ones(2))
    finally:
        worker.close()
    assert not (tmp_path / "scratch" / "hook-ran").exists()
