"""compare.assert_close, the one comparison: a NumPy reference on the host and a torch reference
where it lives give the same verdicts and the same messages."""

from __future__ import annotations

import numpy as np
import pytest

from grader.judge.compare import CheckFailed, assert_close
from grader.wire.codec import TensorValue

torch = pytest.importorskip("torch")


def got_of(a: np.ndarray, dtype: str = "float16") -> TensorValue:
    a = a.astype(dtype)
    return TensorValue(a, dtype, "cpu", a.shape, tuple(x // a.itemsize for x in a.strides))


def message(got, expected, **kw) -> str:
    with pytest.raises(CheckFailed) as e:
        assert_close(got, expected, what="softmax(x)", **kw)
    return str(e.value)


@pytest.mark.parametrize("spoil", ["nan", "inf", "off", "shape", "dtype"])
def test_host_and_device_say_the_same(spoil):
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((5, 7))
    got = ref.copy()
    dtype = "float16"
    if spoil == "nan":
        got[3, 2] = np.nan
    elif spoil == "inf":
        got[1, 4] = np.inf
    elif spoil == "off":
        got[4, 6] += 0.5
    elif spoil == "shape":
        got = got[:, :6]
    else:
        dtype = "float32"
    value = got_of(got, dtype)
    host = message(value, ref, dtype="float16", case="5 x 7", seed=3)
    device = message(value, torch.from_numpy(ref), dtype="float16", case="5 x 7", seed=3)
    if spoil == "nan":   # on a device NaN is most often an element never written
        assert device == host.replace("are NaN)", "are NaN, e.g. never written or read from past the end)")
        assert "[3, 2]" in host
    else:
        assert device == host


def test_right_answers_pass_on_both():
    ref = np.random.default_rng(1).standard_normal((4, 33))
    got = got_of(ref)
    assert assert_close(got, ref, dtype="float16") == pytest.approx(
        assert_close(got, torch.from_numpy(ref), dtype="float16"))
    inf = np.full((2, 2), -np.inf)   # -inf expected and got: not an error
    assert assert_close(got_of(inf, "float32"), torch.from_numpy(inf)) == 0.0
