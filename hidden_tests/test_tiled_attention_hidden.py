"""Hidden checks for tiled_attention: N, d, Br and Bc the public checks do not use (block sizes
that are not powers of two, Br = 1), each shape twice with fresh values (an answer hard-coded
for the public shapes, or cached by shape or call count, fails here), and Q, K, V unchanged."""

from __future__ import annotations

import pytest

from grader.judge import reference
from grader.judge.compare import assert_close
from grader.judge.inputs import randn
from hidden_tests.common import assert_untouched

# (N, d, Br, Bc)
CASES = [(2, 16, 1, 3), (65, 32, 16, 48), (130, 96, 128, 24), (257, 16, 40, 100)]


def _qkv(rng, N, d, dtype):
    return tuple(randn(rng, (N, d), dtype) for _ in range(3))


@pytest.mark.check("tiled_attention.hidden_shapes")
def test_hidden_shapes(student, rng):
    sub = student()
    for dtype in ("float32", "float64"):
        for N, d, Br, Bc in CASES:
            for call in (1, 2):
                Q, K, V = _qkv(rng, N, d, dtype)
                expected = reference.attention(Q, K, V)
                case = f"N={N}, d={d}, {dtype}, call {call} of 2 with this shape"
                assert_close(sub.tiled_attention(Q, K, V, Br=Br, Bc=Bc), expected,
                             what=f"tiled_attention(Q, K, V, Br={Br}, Bc={Bc})", dtype=dtype,
                             case=case, seed=rng.seed)
                assert_close(sub.naive_attention(Q, K, V), expected, what="naive_attention(Q, K, V)",
                             dtype=dtype, case=case, seed=rng.seed)


@pytest.mark.check("tiled_attention.inputs_untouched")
def test_inputs_untouched(student, rng):
    sub = student()
    for fn, kwargs in (("tiled_attention", {"Br": 32, "Bc": 48}), ("naive_attention", {})):
        Q, K, V = _qkv(rng, 100, 32, "float32")
        r = sub.call(fn, Q, K, V, **kwargs, opts={"return_args": True})
        what = f"{fn}(Q, K, V)"
        assert_untouched([Q, K, V], r.extras.get("args_after", []), ["Q", "K", "V"], what, rng.seed)
        assert_close(r.value, reference.attention(Q, K, V), what=what, dtype="float32",
                     case="N=100, d=32", seed=rng.seed)
