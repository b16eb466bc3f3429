"""compare.assert_close, the one comparison: a NumPy reference on the host and a torch reference
where it lives give the same verdicts and the same messages."""

from __future__ import annotations

import numpy as np
import pytest

from grader.judge.answers.compare import CheckFailed, assert_close
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


def test_baseline_rule_moves_with_pytorch_error():
    """flash-attention's rule (`baseline=`): within BASELINE_MULT x the same-precision error plus
    a floor, the same on the host and on a device; an overflowed baseline leaves the floor."""
    from grader.judge.answers.compare import BASELINE_FLOOR, BASELINE_MULT

    ref = np.random.default_rng(2).standard_normal((6, 8)) * 0.5
    base = ref + 1e-2                     # PyTorch in float16 off by 1e-2 everywhere
    floor = BASELINE_FLOOR["float16"]
    near = ref.copy()
    near[2, 3] += BASELINE_MULT * 1e-2    # inside the multiple, far outside the floor
    far = ref.copy()
    far[2, 3] += BASELINE_MULT * 1e-2 + 2 * floor
    # a baseline that np.asarray cannot read (on the GPU: a CUDA tensor; here one that requires
    # grad) beside a NumPy reference, and the other way round, as the gpu and perf layers pass them
    device_like = torch.from_numpy(base).requires_grad_()
    pairs = ((ref, base), (torch.from_numpy(ref), torch.from_numpy(base)), (ref, device_like),
             (torch.from_numpy(ref), base))
    for expected, baseline in pairs:
        assert assert_close(got_of(near, "float32"), expected, dtype="float32",
                            baseline=baseline, floor=floor) > 3e-2
        text = message(got_of(far, "float32"), expected, dtype="float32", baseline=baseline,
                       floor=floor)
        assert f"{BASELINE_MULT:g} x PyTorch's float32 error 0.01" in text and "[2, 3]" in text
    with np.errstate(over="ignore"):
        overflowed = np.full_like(ref, np.inf)
    assert "not finite" in message(got_of(far, "float32"), ref, dtype="float32",
                                   baseline=overflowed)
