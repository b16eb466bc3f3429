"""What crosses the trust boundary is data, never code."""

from __future__ import annotations

import numpy as np
import pytest

from grader.wire import codec


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


def test_str_and_int_subclasses_cross_as_plain_values():
    class Sneaky(str):
        def __str__(self):
            raise RuntimeError("no")

    class Big(int):
        pass

    back = roundtrip([Sneaky("hello"), Big(7)])
    assert back == ["hello", 7] and type(back[0]) is str and type(back[1]) is int


def test_receive_refuses_oversized_messages():
    from multiprocessing import Pipe

    a, b = Pipe()
    a.send_bytes(b'{"parts": 2}')
    a.send_bytes(b'{"__ndarray__": 0, "dtype": "uint8", "shape": [100]}')
    a.send_bytes(b"x" * 100)
    with pytest.raises(codec.CodecError, match="larger than"):
        codec.recv(b, max_bytes=64)


def test_a_kept_array_crosses_once_and_later_markers_name_it():
    """A timed request's array argument (codec.TensorArg.kept): the first marker carries the
    values and the worker keeps them; a marker with the key alone is built from them, as a copy
    of its own (a call that writes into its input changes no later request's); a key the worker
    does not hold is the grader's error, not a tensor of anything."""
    import torch

    from grader.worker import probes

    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    first = codec.TensorArg(values, "float16", "cpu", guard=2, kept="t-1")
    later = codec.TensorArg(None, "float16", "cpu", guard=2, kept="t-1")
    parts = codec.encode([first, later])
    assert len(parts) == 2                       # one buffer: the array crosses once
    sent = codec.decode(codec.encode(later))
    assert sent.array is None and sent.seed is None and sent.kept == "t-1"
    a, b = codec.decode(parts, build=probes.build_marker)
    assert torch.equal(a, b) and a.dtype == torch.float16 and a.data_ptr() != b.data_ptr()
    a.add_(1)
    c = codec.decode(codec.encode(later), build=probes.build_marker)
    assert torch.equal(c, b)
    probes.forget_inputs()
    for k in range(probes.KEPT_MAX):             # the oldest key goes first
        codec.decode(codec.encode(codec.TensorArg(values, "float32", kept=f"t-{k + 2}")),
                     build=probes.build_marker)
    with pytest.raises(codec.CodecError, match="no input kept"):   # the worker: grader_error
        codec.decode(codec.encode(later), build=probes.build_marker)
    probes.forget_inputs()
