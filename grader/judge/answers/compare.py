"""Comparing a student's output with a float64 reference, with messages a student can act on.

The tolerance and dtype policy (docs/ARCHITECTURE.md, "Tolerances and dtypes", points here)
--------------------------------------------------------------------------------------------
1. The reference is float64, computed in the trusted process from the exact values the student
   received (inputs are rounded to their dtype before anything is computed). NaN never passes.
2. Tolerances sit a few units of rounding above what a correct implementation gets in the
   precision it is allowed to use, and far below what any of the lesson's mistakes produce (a
   missing rescale or mask is off by O(1)).
   Low-precision attention outputs (`assert_close(..., baseline=...)`) are judged instead by
   flash-attention's rule, per case: the max abs error against the float64 (or float32)
   reference may be at most BASELINE_MULT times that of the same computation done by plain
   PyTorch in the input dtype on the same inputs (`baseline`: eager ops in float16, on whatever
   device the inputs live, so the interp and gpu layers apply one rule), plus a floor
   (BASELINE_FLOOR[dtype] * max(1, max |reference|)) for a case where PyTorch's error is ~0.
   A fixed tolerance sits at one point of a distribution: a correct float16 kernel whose
   rounding differs from tl.dot's (q . k summed element-wise in float16) lands on either side
   of it from draw to draw (issue 23); a multiple of what PyTorch gets on the very same inputs
   moves with the draw.
3. NumPy exercises (`assert_close(..., input_dtype=...)`, `state_rtol`): the interface does not
   fix the output dtype, so it is not graded. Any float output is read as float64, and float64
   for float32 or float16 input is as right as the input's own dtype. Arithmetic may be done in
   float32 or better whatever the input (float32 accumulation, as the GPU kernels do), so the
   tolerance is that of the precision used: float32's, or float16's where the output may be
   rounded to float16 input's dtype, widened for sums of n terms by sqrt(n) float32 roundings
   (`terms`); never a fixed 1e-6. An output less precise than the input (float16 for float32
   input) fails on its values, and the message says why.
4. Triton exercises (`assert_close(..., dtype=...)`): the wrapper allocates the output, so the
   interface fixes its dtype; it is graded there, and the tolerance is that dtype's row below.
   Only one small check per exercise should fail for a wrong output dtype alone.
"""

from __future__ import annotations

import contextlib
import math
import sys

import numpy as np

from grader.judge.answers import pictured
from grader.wire.codec import TensorValue

# dtype of the output (Triton) or precision used (NumPy) -> (atol, rtol) against float64
TOLERANCES = {
    "float64": (1e-9, 1e-9),      # float64 throughout: rounding only
    "float32": (2e-5, 2e-5),      # float32 sums over a few thousand terms
    "float16": (3e-3, 3e-3),      # output rounding 2^-11 plus p cast to fp16 before the dot
    "bfloat16": (2e-2, 2e-2),     # 8-bit mantissa: rounding 2^-8 on p and on the output
}
# unit roundoff of each precision, for sums of many terms
EPS = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
_RANK = {"float16": 0, "bfloat16": 0, "float32": 1, "float64": 2}

# flash-attention's rule (`baseline=`). Their tests allow 2x, for kernels that accumulate q . k
# and p @ v in float32 as tl.dot does; this lab's solutions land at 0.2-1.4x eager PyTorch in
# float16 (which rounds q k^T, p and the output to float16). 4x also admits the float16 styles
# of public kernels, on every draw: q . k formed element-wise with float16 products and sums
# (~1-2x under the interpreter, up to ~5x for a sum the GPU adds in float16, measured on 20-30
# draws of every public case; tests/exercises/flash_decode/variants/decode_fp16_elementwise_qk)
# and the backward's D = rowsum(dO * O) summed in float16 (flash_backward/variants/
# flash_bwd_fp16_delta). The lesson's mistakes (a missing scale, rescale or mask, a wrong
# head or split) fail their checks by 10-1000x this bound (tests/test_mutants.py).
BASELINE_MULT = 4
# floor of the rule, times max(1, max |reference|): a few units of rounding of the output dtype
BASELINE_FLOOR = {"float64": 1e-9, "float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


def numpy_tolerance(input_dtype: str, terms: int = 1) -> tuple[float, float]:
    """(atol, rtol) for a NumPy output computed from `input_dtype` input with sums of `terms`.

    float32 arithmetic is accepted for every input, and the output may be rounded to the input's
    own dtype: float16 input gets float16's row, float32 and float64 float32's; sums of `terms`
    values add 8 * sqrt(terms) float32 roundings (a float32 running sum over 5003 elements is
    about 3e-6 off; the bound there is 5.4e-5)."""
    atol, rtol = TOLERANCES["float16" if _RANK.get(input_dtype, 1) == 0 else "float32"]
    widen = 8 * math.sqrt(max(terms, 1)) * EPS["float32"]
    return atol + widen, rtol + widen


def state_rtol(input_dtype: str, n: int) -> float:
    """Relative tolerance on l = sum(exp(x - m)) over n elements: float32 accumulation passes."""
    return numpy_tolerance(input_dtype, n)[1]


class CheckFailed(AssertionError):
    """A wrong answer (status failed).

    hint: what this failure's evidence points at ("the error starts where the row max moves
    into a later key block: is acc rescaled by alpha?"). The report shows it instead of the
    registry's general hint, which is only the fallback.
    follows: the check ids whose failure explains this one, from this failure's evidence (a
    tiled check failed because the call held the N x N scores: memory_is_tiled's idea); None
    keeps the registry's `Check.follows`, () makes this failure a lead of its own.
    secondary: the check failed only because another check's idea failed in its call (a
    property on a wrong answer): no other failure is grouped under it, and the report's hint
    names the failing checks that show the wrong answer (GradeReport.explain_secondary).
    kind: what a comparison found (assert_close): "shape", "dtype", "nan", "inf" or "values";
    "" for any other failure. A check whose idea is one of them (overflow: "nan", "inf") tells
    its own failure from a wrong answer by it.
    picture: what a picture of a failed comparison needs (grader/judge/answers/pictured.py), or None.
    A CheckFailed made while a comparison's failure is handled keeps that failure's picture
    (`raise CheckFailed(str(e), hint=...)` in an except block), so a check's own wording of a
    failure still shows where the answer is wrong."""

    def __init__(self, message: str = "", hint: str = "", follows: tuple | None = None,
                 secondary: bool = False, kind: str = "", picture: dict | None = None):
        super().__init__(message)
        self.hint = hint
        self.follows = follows
        self.secondary = secondary
        self.kind = kind
        handled = sys.exc_info()[1]
        if picture is None and isinstance(handled, CheckFailed):
            picture = handled.picture
        self.picture = picture


@contextlib.contextmanager
def answer_must_be_right(prop: str, follows: tuple, own: tuple = ()):
    """Around the judging of a property check's own call: a property (every lane in bounds,
    every element written, the kernel launched, the memory tiled) earns points only on a call
    whose answer is right. A CheckFailed from the judging becomes a secondary failure of the
    property's check: its message says the answer was wrong, it carries no hint of its own
    idea, and the report groups it under the correctness check that failed (`follows`, the
    first that did) and names only checks that failed. `own`: the kinds of comparison failure
    (CheckFailed.kind) that are this check's own idea (an overflow check's "nan" and "inf"),
    which stay its own failure."""
    try:
        yield
    except CheckFailed as e:
        if e.kind and e.kind in own:
            raise
        raise as_secondary(e, prop, follows) from None


def as_secondary(e: CheckFailed, prop: str = "", follows: tuple | None = None) -> CheckFailed:
    """`e`, a wrong answer, as a property check's secondary failure (answer_must_be_right)."""
    said = f"; the call {prop}, but its answer is wrong, so that earns nothing" if prop else ""
    return CheckFailed(f"The answer was wrong: {e}{said}", follows=follows, secondary=True,
                       kind=e.kind, picture=e.picture)


def assert_right_answer(got, expected, *, prop: str, follows: tuple, what: str, dtype: str,
                        case: str = "", seed=None, baseline=None) -> None:
    """answer_must_be_right around this call's answer compared in full, as the correctness
    checks compare it (`baseline`: flash-attention's rule, as in assert_close)."""
    with answer_must_be_right(prop, follows):
        assert_close(got, expected, what=what, dtype=dtype, case=case, seed=seed,
                     baseline=baseline)


def dtype_name(x) -> str:
    if isinstance(x, TensorValue):
        return x.dtype
    return np.asarray(x).dtype.name


def values(x) -> np.ndarray:
    return x.array if isinstance(x, TensorValue) else np.asarray(x)


def _is_tensor(x) -> bool:
    """A torch tensor, on any device (torch is never imported for the question)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def baseline_floor(dtype: str, magnitude: float) -> float:
    """The floor of flash-attention's rule: BASELINE_FLOOR[dtype] x max(1, magnitude), where
    magnitude is the size of what is compared (by default max |reference|)."""
    return BASELINE_FLOOR.get(dtype, BASELINE_FLOOR["float32"]) * max(1.0, magnitude)


def where(index: tuple) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def assert_close(got, expected, *, what: str = "output", dtype: str | None = None,
                 input_dtype: str | None = None, terms: int = 1,
                 atol: float | None = None, rtol: float | None = None,
                 baseline=None, floor: float | None = None,
                 case: str = "", seed: int | None = None, grid: tuple | None = None) -> float:
    """Fail with "expected vs got" unless `got` matches `expected` everywhere.

    got: what the student returned (NumPy array, TensorValue or number).
    expected: the reference values: a NumPy array (float64), or a torch tensor on any device
        (a GPU reference of a large output): the comparison then runs there, with the same
        rules and messages.
    dtype: the dtype the output must have (Triton: the wrapper allocates it); checked when given.
    input_dtype: NumPy exercises instead: the dtype of the input; any float output is accepted
        and the tolerance is `numpy_tolerance(input_dtype, terms)` (see the policy above).
    baseline: flash-attention's rule instead of the table: the same output computed by plain
        PyTorch in the input dtype on the same inputs (array or tensor, the shape of
        `expected`). The max abs error may be at most BASELINE_MULT times the baseline's, plus `floor`
        (default BASELINE_FLOOR[dtype] * max(1, max |expected|)); a baseline that is not finite
        (PyTorch overflowed) leaves the floor alone.
    grid: (rows, columns) of the exercise's tiles in the output's last two dimensions (BLOCK_M
        rows for attention, BLOCK columns for softmax; None: no blocks), for the picture of a
        failure (grader/judge/answers/pictured.py), drawn on that grid.
    Returns the max abs error.
    """
    context = "".join([f" ({case})" if case else "", f" [seed {seed}]" if seed is not None else ""])
    got_dtype = dtype_name(got) if not np.isscalar(got) else type(got).__name__
    if dtype is not None and got_dtype != dtype:
        raise CheckFailed(f"{what}{context}: expected dtype {dtype}, got {got_dtype}", kind="dtype")
    note = ""
    if input_dtype is not None:
        if np.asarray(values(got)).dtype.kind not in "fiu":
            raise CheckFailed(f"{what}{context}: expected an array of floats, got "
                              f"{type(got).__name__} of dtype {got_dtype}", kind="dtype")
        table_atol, table_rtol = numpy_tolerance(input_dtype, terms)
        atol = table_atol if atol is None else atol
        rtol = table_rtol if rtol is None else rtol
        if _RANK.get(got_dtype, 2) < _RANK.get(input_dtype, 1):
            note = (f" (the output is {got_dtype}, less precise than the {input_dtype} input: "
                    f"return at least {input_dtype})")
    ops = _Torch(expected) if _is_tensor(expected) else _NumPy
    g, e = ops.float64(got), ops.float64(expected)
    if tuple(g.shape) != tuple(e.shape):
        raise CheckFailed(f"{what}{context}: expected shape {tuple(e.shape)}, got {tuple(g.shape)}",
                          kind="shape")
    size = int(np.prod(e.shape))
    if size == 0:
        return 0.0
    table = TOLERANCES.get(dtype or got_dtype, TOLERANCES["float32"])
    atol = table[0] if atol is None else atol
    rtol = table[1] if rtol is None else rtol
    allowed = ""
    if baseline is not None:
        atol, allowed = _baseline_rule(ops, e, baseline, floor, dtype or got_dtype)
        rtol = 0.0

    def picture(bad, kind: str, idx: tuple):
        return pictured.capture(g, e, bad, atol=atol, rtol=rtol, kind=kind, index=idx,
                                what=what, case=context.strip(), grid=grid)

    nan = ops.isnan(g) & ~ops.isnan(e)
    if nan.any():
        idx = ops.first(nan)
        why = ", e.g. never written or read from past the end" if ops is not _NumPy else ""
        raise CheckFailed(f"{what}{context}: got NaN at {where(idx)} ({int(nan.sum())} of {size} "
                          f"elements are NaN{why}); expected {float(e[idx]):.6g} there", kind="nan",
                          picture=picture(nan, "nan", idx))
    inf = ops.isinf(g) & ~ops.isinf(e)
    if inf.any():
        idx = ops.first(inf)
        raise CheckFailed(f"{what}{context}: got {float(g[idx])} at {where(idx)} ({int(inf.sum())} "
                          f"elements overflowed); expected {float(e[idx]):.6g}", kind="inf",
                          picture=picture(inf, "inf", idx))
    err = abs(g - e)
    err[ops.isinf(e) & (g == e)] = 0.0
    bad = err > atol + rtol * abs(e)
    worst = float(err.max())
    if bad.any():
        idx = ops.first(bad, err)
        raise CheckFailed(
            f"{what}{context}: max abs error {worst:.3g} at {where(idx)}: got {float(g[idx]):.6g}, "
            f"expected {float(e[idx]):.6g}; {int(bad.sum())} of {size} elements outside "
            f"atol={atol:.3g}, rtol={rtol:.3g}{allowed}{note}", kind="values",
            picture=picture(bad, "values", idx))
    return worst


def _baseline_rule(ops, expected, baseline, floor: float | None, dtype: str):
    """(atol, its explanation) of flash-attention's rule: BASELINE_MULT x the max abs error of the
    same-precision PyTorch output `baseline` against `expected`, plus the floor."""
    b = ops.float64(baseline)
    if tuple(b.shape) != tuple(expected.shape):
        raise ValueError(f"baseline of shape {tuple(b.shape)} for a reference of shape "
                         f"{tuple(expected.shape)}")
    finite = ops.isfinite(expected)
    if floor is None:
        floor = baseline_floor(dtype, float(abs(expected[finite]).max()) if finite.any() else 0.0)
    base = float(abs(b[finite] - expected[finite]).max()) if finite.any() else 0.0
    if not math.isfinite(base):   # PyTorch overflowed here: the floor alone
        return floor, f" (the floor {floor:.2g}; PyTorch in {dtype} is not finite here)"
    return BASELINE_MULT * base + floor, (f" (allowed: {BASELINE_MULT:g} x PyTorch's {dtype} "
                                          f"error {base:.2g} + floor {floor:.2g})")


class _NumPy:
    """assert_close's operations on the host."""
    isnan, isinf, isfinite = staticmethod(np.isnan), staticmethod(np.isinf), staticmethod(np.isfinite)

    @staticmethod
    def float64(x):
        if _is_tensor(x):   # a torch baseline (e.g. on the GPU) beside a NumPy reference
            x = x.detach().double().cpu().numpy()
        return np.asarray(values(x), dtype=np.float64)

    @staticmethod
    def first(mask, err=None) -> tuple:
        """The index of the first True of `mask`, or with `err`, of its largest error."""
        flat = np.argmax(mask) if err is None else np.argmax(np.where(mask, err, -1.0))
        return np.unravel_index(flat, mask.shape)


class _Torch:
    """assert_close's operations where the reference tensor lives (a GPU): a large output is
    never copied to the host in float64."""

    def __init__(self, reference):
        import torch

        self.torch, self.device = torch, reference.device
        self.isnan, self.isinf, self.isfinite = torch.isnan, torch.isinf, torch.isfinite

    def float64(self, x):
        t = self.torch
        return (x if isinstance(x, t.Tensor) else t.from_numpy(values(x))).to(self.device, t.float64)

    def first(self, mask, err=None) -> tuple:
        t = self.torch
        flat = mask.flatten().int().argmax() if err is None else \
            t.where(mask, err, t.full_like(err, -1.0)).flatten().argmax()
        return tuple(int(i) for i in t.unravel_index(flat, mask.shape))


def assert_shape(got, shape: tuple, what: str = "output", dtype: str | None = None) -> None:
    got_shape = tuple(values(got).shape) if not np.isscalar(got) else ()
    if got_shape != tuple(shape):
        raise CheckFailed(f"{what}: expected shape {tuple(shape)}, got {got_shape}")
    if dtype is not None and dtype_name(got) != dtype:
        raise CheckFailed(f"{what}: expected dtype {dtype}, got {dtype_name(got)}")
