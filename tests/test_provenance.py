"""Provenance (grader.judge.evidence.provenance, issue 18): a Triton exercise's answer must be what its
recorded launches compute from the call's inputs, replayed in a worker that holds only the
submission's kernels (grader.judge.evidence.kernel_source).

The cheats that prove it end to end, graded with the static audit off, are
tests/exercises/*/cheats/ marked `without_audit` (tests/test_cheats.py): SDPA or torch.softmax
behind an alias of torch._C._DisableTorchDispatch, NumPy, a thread, a kernel that writes
nothing, a kernel body that is Python. Here: the filter, the validation and the comparison,
on hand-made programs, without a worker.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.judge.evidence import kernel_source, kernel_use, validated
from grader.judge.evidence import replayed as replay_compare
from grader.judge.answers.compare import CheckFailed
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
    validated.validate(program, "softmax(x)", kernel_use.ALLOWED_OPS, info)


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


def _value(a, dtype: str = "float32") -> TensorValue:
    a = np.asarray(a, dtype=np.float32)
    return TensorValue(a, dtype, "cpu", a.shape, (1,))


def test_replayed_outputs_must_equal_the_call_exactly():
    same = {"outputs": [_value([1.0, np.nan, 3.0])], "compile": [], "error": ""}
    replay_compare.compare(same, _value([1.0, np.nan, 3.0]), "softmax(x)", atomics=False)
    with pytest.raises(CheckFailed, match=r"gives nan at \[1\], the call returned 2"):
        replay_compare.compare({**same, "outputs": [_value([1.0, np.nan, 3.0])]},
                           _value([1.0, 2.0, 3.0]), "softmax(x)", atomics=False)
    with pytest.raises(CheckFailed, match="does not compile with Triton's front end"):
        replay_compare.compare({**same, "compile": [{"kernel": "k", "error": "CompilationError"}]},
                           _value([1.0, 2.0, 3.0]), "softmax(x)", atomics=False)


def test_the_same_bits_pass_at_once_and_a_differing_bit_is_still_found():
    """The comparison's fast path (grader.judge.evidence.replayed._same_bits) agrees with the elementwise
    one: the same bytes (NaN payloads included) pass, one element off fails with its place,
    and -0.0 against 0.0, different bits but equal values, passes as it did."""
    a = np.random.default_rng(0).standard_normal((4, 1000)).astype(np.float16)
    b = a.copy()
    b[2, 777] = np.float16(np.nan)
    a[2, 777] = np.float16(np.nan)
    replay_compare._same(a, b, "float16", "f(x)", 0, False)
    b[3, 5] += np.float16(1)
    with pytest.raises(CheckFailed, match=r"at \[3, 5\]"):
        replay_compare._same(a, b, "float16", "f(x)", 0, False)
    zeros = np.zeros(3, np.float32)
    replay_compare._same(zeros, -zeros, "float32", "f(x)", 0, False)


def test_atomics_get_a_tight_tolerance_only():
    replayed = {"outputs": [_value([1.0, 2.0, 3.0 + 1e-6])], "compile": [], "error": ""}
    replay_compare.compare(replayed, _value([1.0, 2.0, 3.0]), "flash_bwd(...)", atomics=True)
    with pytest.raises(CheckFailed):
        replay_compare.compare(replayed, _value([1.0, 2.0, 3.0]), "flash_bwd(...)", atomics=False)
    with pytest.raises(CheckFailed):
        replay_compare.compare({**replayed, "outputs": [_value([1.0, 2.0, 3.1])]},
                           _value([1.0, 2.0, 3.0]), "flash_bwd(...)", atomics=True)


def test_the_sanitizers_call_is_replayed_too(tmp_path):
    """The sanitizer's checked call goes through the same gate: torch.softmax behind an alias
    of _DisableTorchDispatch, copied by a kernel, earns nothing under the tool either (here a
    stand-in for compute-sanitizer that runs the worker and reports no error)."""
    pytest.importorskip("triton")
    from grader.judge.evidence import sanitize
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
        replay_compare.compare(nothing, np.zeros(4), "softmax(x)", atomics=False)
    with pytest.raises(CheckFailed, match="returned a float"):
        replay_compare.compare(nothing, (None, 1.5), "softmax(x)", atomics=False)


# ------------------------------------------------------------------- the replay on fresh inputs


def test_a_replay_on_moved_inputs_must_err_no_more_than_the_call():
    """grader.judge.evidence.moved_inputs: numbers carried over from the call's values fail; a kernel that errs
    as much on the moved inputs as on its own passes, rounding and all."""
    from grader.judge.evidence import moved_inputs
    from grader.judge.answers import reference
    from grader.judge.answers.inputs import tensor

    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((3, 50)).astype(np.float32)
    x0[1, 7] = -np.inf
    x = tensor(x0, "float32", guard=8)
    form = moved_inputs.form_of("softmax_triton", "softmax", (x,), {}, rng)
    new = form.args[0].array
    assert new.shape == (3, 50) and form.args[0].guard == 8 and not np.array_equal(new, x0)
    assert np.isneginf(new[1, 7]) and (np.sign(new) == np.sign(x0)).all()
    ratio = new[np.isfinite(x0)] / x0[np.isfinite(x0)]
    assert ratio.min() >= 1 - moved_inputs.SPREAD - 1e-6 and ratio.max() <= 1 + moved_inputs.SPREAD + 1e-6
    assert np.allclose(form.expected[0], reference.softmax(new.astype(np.float64)))
    # an honest float32 kernel: the same small error on both
    call = _value(form.before[0] * (1 + 3e-7))
    moved_inputs.compare({"outputs": [_value(form.expected[0] * (1 - 3e-7))], "compile": [], "error": ""},
                  form, call, "softmax(x)")
    # the row max and sum of the call's x carried into the replay
    m, l = x0.max(1, keepdims=True), np.exp(x0 - x0.max(1, keepdims=True)).sum(1, keepdims=True)
    with np.errstate(invalid="ignore"):
        stale = np.exp(new.astype(np.float64) - m) / l
    with pytest.raises(CheckFailed, match="moved by at most 20%"):
        moved_inputs.compare({"outputs": [_value(stale)], "compile": [], "error": ""}, form, call,
                      "softmax(x)")
    # the worker's own draws (GPU sizes) have no moved-inputs form: their outputs are too large for
    # launch scalars to carry
    from grader.judge.answers.inputs import seeded
    assert moved_inputs.form_of("softmax_triton", "softmax", (seeded((4, 8), "float16", "cuda", 1),),
                         {}, rng) is None
    assert moved_inputs.form_of("online_softmax", "online_max_sum", (x,), {}, rng) is None


def test_a_failure_on_moved_inputs_must_repeat_on_a_new_draw():
    """grader.judge.evidence.moved_inputs.judge: an honest kernel past the limit on one draw (a near-tie the
    moved values made) passes on the next; numbers carried from the call's values fail every
    draw, and the call fails."""
    from grader.judge.evidence import moved_inputs
    from grader.judge.answers.inputs import tensor

    rng = np.random.default_rng(1)
    x = tensor(rng.standard_normal((4, 32)).astype(np.float32), "float32")

    def draw():
        return moved_inputs.form_of("softmax_triton", "softmax", (x,), {}, rng)

    def outputs(arrays):
        return {"outputs": [_value(a) for a in arrays], "compile": [], "error": ""}

    form = draw()
    call = _value(form.before[0])
    replays = []

    def honest_then_unlucky(f):   # the first draw off by 5%, the next exact
        replays.append(f)
        return outputs([f.expected[0] * (1.05 if len(replays) == 1 else 1.0)])
    moved_inputs.judge(form, honest_then_unlucky, draw, call, "softmax(x)")
    assert len(replays) == 2 and replays[0] is not replays[1]

    def always_off(f):
        return outputs([f.expected[0] * 1.05])
    with pytest.raises(CheckFailed, match="moved by at most 20%"):
        moved_inputs.judge(draw(), always_off, draw, call, "softmax(x)")
    replays.clear()
    moved_inputs.judge(draw(), lambda f: replays.append(f) or outputs([f.expected[0]]), draw, call,
                "softmax(x)")
    assert len(replays) == 1   # a pass costs one replay


def _decode_fp16_scores(q, k, v):
    """flash_decode with q . k formed as decode_fp16_elementwise_qk does under the interpreter:
    float16 products, their sum rounded to float16 (full caches, Hq = Hkv)."""
    from grader.judge.answers.inputs import round_to

    s = (q[:, :, None, :].astype(np.float16) * k.astype(np.float16)).astype(np.float32).sum(-1)
    s = s.astype(np.float16).astype(np.float64) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    return round_to(np.einsum("bhn,bhnd->bhd", p, v.astype(np.float64)) / p.sum(-1)[..., None],
                    "float16")


def test_decode_floor_covers_float16_scores_at_a_near_tie():
    """flash_decode's floor (reference.score_rounding_floor): a correct kernel that rounds its
    scores to float16 passes the second replay at flash_decode.large_scores's scores (~300),
    where a near-tie the moved values make puts it past GROWTH times its own error (it failed CI
    twice without the floor); a carried-over answer at ordinary scores still fails."""
    from grader.exercises.flash_decode.reference import decode_inputs
    from grader.judge.evidence import moved_inputs
    from grader.judge.answers.inputs import tensor

    rng = np.random.default_rng(7)
    past_without = 0
    for _ in range(40):
        q, k, v = decode_inputs(rng, 2, 2, 2, 96, 64, scale=10.0)
        args = (*(tensor(t, "float16") for t in (q, k, v)), tensor(np.array([96, 96]), "int32"))
        form = moved_inputs.form_of("flash_decode", "flash_decode", args, {}, rng)
        got = _value(_decode_fp16_scores(*(a.array for a in form.args[:3])), "float16")
        call = _value(_decode_fp16_scores(q, k, v), "float16")
        moved_inputs.compare({"outputs": [got], "compile": [], "error": ""}, form, call, "flash_decode")
        try:
            moved_inputs.compare({"outputs": [got], "compile": [], "error": ""},
                          moved_inputs.MovedInputs(form.args, {}, form.expected, form.before), call, "")
        except CheckFailed:
            past_without += 1
    assert past_without, "no draw made a near-tie: the floor was not exercised"
    q, k, v = decode_inputs(rng, 2, 2, 2, 96, 64)
    args = (*(tensor(t, "float16") for t in (q, k, v)), tensor(np.array([96, 96]), "int32"))
    form = moved_inputs.form_of("flash_decode", "flash_decode", args, {}, rng)
    with pytest.raises(CheckFailed, match="moved by at most 20%"):
        moved_inputs.compare({"outputs": [_value(form.before[0], "float16")], "compile": [], "error": ""},
                      form, _value(_decode_fp16_scores(q, k, v), "float16"), "flash_decode")


def test_flash_bwd_gets_the_o_and_lse_of_its_fresh_inputs():
    from grader.judge.evidence import moved_inputs
    from grader.judge.answers import reference
    from grader.judge.answers.inputs import round_to, tensor

    rng = np.random.default_rng(1)
    shape = (1, 2, 9, 16)
    q, k, v, o, do = (tensor(round_to(rng.standard_normal(shape), "float16"), "float16")
                      for _ in range(5))
    lse = tensor(rng.standard_normal(shape[:-1]).astype(np.float32), "float32")
    form = moved_inputs.form_of("flash_backward", "flash_bwd", (q, k, v, o, lse, do), {"causal": True},
                         rng)
    nq, nk, nv, no, nl, ndo = (a.array.astype(np.float64) for a in form.args)
    want_o, want_l, _ = reference.attention_lse(nq, nk, nv, causal=True)
    assert np.allclose(no, want_o, atol=1e-3) and np.allclose(nl, want_l, atol=1e-5)
    grads = reference.attention_grads(nq, nk, nv, ndo, causal=True)
    assert all(np.allclose(a, b) for a, b in zip(form.expected, grads))
    before = reference.attention_grads(*(a.array.astype(np.float64) for a in (q, k, v, do)),
                                       causal=True)
    assert all(np.allclose(a, b) for a, b in zip(form.before, before))
    assert form.kwargs == {"causal": True}


def test_every_triton_exercise_has_a_fresh_form():
    """A new Triton exercise whose kernel.py has no `moved_inputs` would get no second replay."""
    from grader.registry import EXERCISES, exercise_module

    for name, ex in EXERCISES.items():
        if ex.kernels:
            assert callable(exercise_module(name, "kernel").moved_inputs), name


def test_which_calls_get_the_second_replay():
    """Small outputs and launches that carry more than an honest wrapper's always; the rest
    sampled, the draw made in the grader after the call."""
    from grader.judge.evidence import moved_inputs

    cap = validated.CAPACITY_BITS
    honest = {"launches": 1, "float": {0.25}, "int": {4, 64, 1000}, "str": set()}
    small, large = _value(np.zeros(cap // moved_inputs.BITS)), _value(np.zeros(cap))
    assert moved_inputs.wanted(honest, small, cap)
    assert moved_inputs.wanted({**honest, "float": {0.25, 3.1}}, large, cap)
    assert moved_inputs.wanted({**honest, "str": {"x"}}, large, cap)
    assert moved_inputs.wanted({**honest, "launches": moved_inputs.LAUNCHES + 1}, large, cap)
    draws = [moved_inputs.wanted(honest, large, cap, np.random.default_rng(i)) for i in range(400)]
    assert 0.15 < sum(draws) / len(draws) < 0.35
