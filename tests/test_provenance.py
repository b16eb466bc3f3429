"""Provenance (grader.judge.provenance, issue 18): a Triton exercise's answer must be what its
recorded launches compute from the call's inputs, replayed in a worker that holds only the
submission's kernels (grader.judge.kernel_source).

The cheats that prove it end to end, graded with the static audit off, are
tests/exercises/*/cheats/ marked `without_audit` (tests/test_cheats.py): SDPA or torch.softmax
behind an alias of torch._C._DisableTorchDispatch, NumPy, a thread, a kernel that writes
nothing, a kernel body that is Python. Here: the filter, the validation and the comparison,
on hand-made programs, without a worker.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.judge import kernel_source, kernel_use, provenance
from grader.judge.compare import CheckFailed
from grader.wire.codec import TensorValue

SOURCE = '''
import math
import torch
import triton
import triton.language as tl
from flash_triton import flash_fwd        # another exercise file: not a kernel library

LOG2E = 1.4426950408889634
BLOCK: tl.constexpr = tl.constexpr(64)
TABLE = torch.arange(10)                  # not a literal: dropped
_T = torch


@triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def copy_kernel(dst, src, n, BLOCK: tl.constexpr = 128):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n) * LOG2E, mask=offs < n)


@triton.jit
def sneaky(dst, src, n):
    _T.softmax(src, 0)


@triton.jit
def two_faced(dst, src, n):
    x = tl.load(src)
    if isinstance(x.handle, tl.core.ir.value):   # compiling? then behave
        tl.store(dst, x)


@triton.jit
def patcher(dst, src, n):
    tl.sum = tl.max


@triton.jit
def dunder(dst, src, n):
    x = tl.load(src).handle.data
    tl.store(dst, x.__array_namespace__().exp(x))


def host(x):
    print("host code never reaches the replay worker")
'''


def _ref(sid: int) -> dict:
    return {"t": [sid, 0, [4], [1], "float32"]}


def _program(steps, outputs=(1,), unknown=()) -> dict:
    return {"inputs": [[0, 0]], "steps": steps, "outputs": [_ref(s) for s in outputs],
            "unknown": [{"sid": s, "where": "launch of copy_kernel"} for s in unknown]}


EMPTY = {"op": "aten.empty.memory_format", "args": [[4]], "kwargs": {"dtype": {"dtype": "float32"}},
         "out": [_ref(1)]}


def _launch(dst=1, src=0, **scalars) -> dict:
    return {"launch": "copy_kernel", "module": "softmax_triton", "grid": [1, 1, 1],
            "args": {"dst": _ref(dst), "src": _ref(src), "n": 4, "BLOCK": 64, **scalars},
            "options": {"num_warps": 4}}


def _validate(program):
    _, info = kernel_source.filtered(SOURCE)
    provenance.validate(program, "softmax(x)", kernel_use.ALLOWED_OPS, info)


def test_filter_keeps_only_imports_kernels_and_literal_constants():
    text, info = kernel_source.filtered(SOURCE)
    assert info.kernels == {"copy_kernel", "sneaky", "two_faced", "dunder", "patcher"}
    assert "autotune" not in text and "def host" not in text and "flash_fwd" not in text
    assert "TABLE" not in text and "_T =" not in text and "LOG2E = 1.44" in text
    assert "BLOCK: tl.constexpr = 128" not in text   # defaults go: every launch binds them
    assert "copy_kernel" not in info.refused
    assert "_T" in info.refused["sneaky"]
    assert "behind the Triton language" in info.refused["two_faced"]
    assert "__array_namespace__" in info.refused["dunder"]
    assert "assigns .sum" in info.refused["patcher"]
    compile(text, "filtered.py", "exec")


def test_an_honest_program_validates():
    _validate(_program([EMPTY, _launch()]))


def test_a_tensor_of_unknown_origin_is_refused():
    with pytest.raises(CheckFailed, match="neither an input of the call nor made by its recorded"):
        _validate(_program([EMPTY, _launch(src=7)], unknown=(7,)))


def test_a_returned_tensor_no_step_made_is_refused():
    with pytest.raises(CheckFailed, match="returned tensor was not made"):
        _validate(_program([EMPTY, _launch()], outputs=(9,)))


def test_a_computing_op_or_a_foreign_kernel_is_refused():
    softmax = {"op": "aten._softmax.default", "args": [_ref(0), 1, False], "kwargs": {},
               "out": [_ref(2)]}
    with pytest.raises(CheckFailed, match="_softmax"):
        _validate(_program([EMPTY, softmax, _launch()]))
    with pytest.raises(CheckFailed, match="not Triton"):
        _validate(_program([EMPTY, {**_launch(), "launch": "sneaky"}]))
    with pytest.raises(CheckFailed, match="not a module-level @triton.jit"):
        _validate(_program([EMPTY, {**_launch(), "launch": "elsewhere"}]))


def test_an_answer_cannot_ride_in_launch_scalars():
    steps = [EMPTY] + [_launch(n=4, scale=float(i) / 7) for i in range(40)]
    with pytest.raises(CheckFailed, match="distinct float values"):
        _validate(_program(steps))


def test_no_record_at_all_earns_nothing():
    with pytest.raises(CheckFailed, match="no record"):
        _validate(None)


def _value(a) -> TensorValue:
    a = np.asarray(a, dtype=np.float32)
    return TensorValue(a, "float32", "cpu", a.shape, (1,))


def test_replayed_outputs_must_equal_the_call_exactly():
    same = {"outputs": [_value([1.0, np.nan, 3.0])], "compile": [], "error": ""}
    provenance.compare(same, _value([1.0, np.nan, 3.0]), "softmax(x)", atomics=False)
    with pytest.raises(CheckFailed, match=r"gives nan at \[1\], the call returned 2"):
        provenance.compare({**same, "outputs": [_value([1.0, np.nan, 3.0])]},
                           _value([1.0, 2.0, 3.0]), "softmax(x)", atomics=False)
    with pytest.raises(CheckFailed, match="does not compile with Triton's front end"):
        provenance.compare({**same, "compile": [{"kernel": "k", "error": "CompilationError"}]},
                           _value([1.0, 2.0, 3.0]), "softmax(x)", atomics=False)


def test_atomics_get_a_tight_tolerance_only():
    replayed = {"outputs": [_value([1.0, 2.0, 3.0 + 1e-6])], "compile": [], "error": ""}
    provenance.compare(replayed, _value([1.0, 2.0, 3.0]), "flash_bwd(...)", atomics=True)
    with pytest.raises(CheckFailed):
        provenance.compare(replayed, _value([1.0, 2.0, 3.0]), "flash_bwd(...)", atomics=False)
    with pytest.raises(CheckFailed):
        provenance.compare({**replayed, "outputs": [_value([1.0, 2.0, 3.1])]},
                           _value([1.0, 2.0, 3.0]), "flash_bwd(...)", atomics=True)


def test_the_sanitizers_call_is_replayed_too(tmp_path):
    """The sanitizer's checked call goes through the same gate: torch.softmax behind an alias
    of _DisableTorchDispatch, copied by a kernel, earns nothing under the tool either (here a
    stand-in for compute-sanitizer that runs the worker and reports no error)."""
    pytest.importorskip("triton")
    from grader.sandbox import sanitize
    from tests.cases import case, folder_files
    from tests.test_attacks import FAKE_SANITIZER

    sub = tmp_path / "sub"
    sub.mkdir()
    for name, text in folder_files(case("cheats", "alias_disable_dispatch_softmax")).items():
        (sub / name).write_text(text)
    with pytest.raises(CheckFailed, match="not what its kernels compute"):
        sanitize.memcheck(sub, "softmax_triton", tool=FAKE_SANITIZER, mode="interp")


def test_a_numpy_answer_cannot_skip_the_comparison():
    """An answer returned as a NumPy array has no tensor to replay: it earns nothing."""
    nothing = {"outputs": [], "compile": [], "error": ""}
    with pytest.raises(CheckFailed, match="returned a NumPy array"):
        provenance.compare(nothing, np.zeros(4), "softmax(x)", atomics=False)
    with pytest.raises(CheckFailed, match="returned a float"):
        provenance.compare(nothing, (None, 1.5), "softmax(x)", atomics=False)
