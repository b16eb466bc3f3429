"""Checks for exercises/softmax_triton.py (lesson: "Writing a kernel: Triton", Build It
softmax_triton.py, Break It 1).

The kernel runs under Triton's interpreter on CPU tensors (mode "interp"). Every input is drawn
fresh from `rng`, rounded here to the dtype the kernel sees, and followed in memory by a block of
NaN. Every call goes through the kernel-use gate (grader.fixtures.Gated): a Triton launch and no
computing torch op, or the check fails; and every tl.load/tl.store is checked lane by lane
against the tensors of the call (grader/worker/bounds.py): a lane past the end is switched off
and recorded, and only `masked_accesses` judges those records, so a missing mask fails that
check, deterministically, whatever a later tl.where does with the value.

One idea per check: values on contiguous float16 rows (matches_float64), float32 input,
row-strided input, masks, Break It 1, the -inf padding, kernel use. References are float64,
computed here from the exact input values. Shapes stay small: the interpreter is slow.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.judge import diagnose, reference
from grader.judge.cases import run_cases
from grader.judge.compare import CheckFailed, assert_close, assert_shape
from grader.judge.inputs import randn, round_to, tensor
from grader.judge.kernel_use import assert_in_bounds, assert_kernel_computed, assert_kernel_wrote
from grader.sandbox import sanitize

# (n_rows, n_cols): 781 and 1000 are not powers of two, 130 leaves half of its 256-lane block
# padded, 1 is a block of one lane, 1024 fills its block exactly
SHAPES = ((5, 781), (4, 130), (3, 1), (3, 1024), (2, 1000))

MASK_HINTS = {
    "tl.load": "Mask the row's load: tl.load(in_ptr + row * row_stride + cols, mask=cols < "
               "n_cols, other=float('-inf')). Without mask= it reads past the end of the row "
               "(the last row: past the end of x), even when tl.where hides the value later.",
    "tl.store": "Mask the store: tl.store(out_ptr + row * out_row_stride + cols, y, mask=cols < "
                "n_cols). Without it the last row writes past the end of the output.",
}


def block_of(n_cols: int) -> int:
    """The tile a one-row-per-program kernel needs: the next power of two >= n_cols."""
    return 1 << max(n_cols - 1, 0).bit_length()


def call_softmax(sub, x: np.ndarray, dtype: str, pad_cols: int = 0):
    """softmax(x) on x (exact values in `dtype`) with a block of NaN behind it, through the gate;
    new tensors in the wrapper are NaN-filled (an element never stored stays NaN)."""
    return sub.call("softmax", tensor(x, dtype, guard=block_of(x.shape[1]), pad_cols=pad_cols),
                    opts={"poison_empty": True})


def run_softmax(sub, x: np.ndarray, dtype: str, case: str, seed: int, what: str = "softmax(x)",
                pad_cols: int = 0):
    """Compare every element of softmax(x) with the float64 reference."""
    got = call_softmax(sub, x, dtype, pad_cols).value
    try:
        assert_close(got, reference.softmax(x, axis=1), what=what, dtype=dtype, case=case, seed=seed)
    except CheckFailed as e:
        # a hint only when the output equals a known mistake's answer (grader/judge/diagnose.py)
        raise CheckFailed(str(e), hint=diagnose.softmax_hint(got, x, dtype=dtype) or e.hint) from None


def _case(sub, x, dtype, case, seed, **kw):
    return (f"{case} [seed {seed}]", lambda: run_softmax(sub, x, dtype, case, seed, **kw))


def shifted(rng, shape, dtype, scale):
    """randn * scale + shift, with every row's max at 20 or more: softmax does not change with
    the shift, and padded lanes loaded as 0 instead of -inf (all_negative_rows' idea) weigh
    exp(0 - max) < 2e-9 each, far below the tolerance, so they do not show here."""
    x = rng.standard_normal(shape) * scale
    return round_to(x + (20.0 - x.max(axis=1, keepdims=True)).clip(0, None), dtype)


@pytest.mark.check("softmax_triton.matches_float64")
def test_matches_float64(student, rng, credit):
    sub = student()
    cases = []
    for n_rows, n_cols in SHAPES:
        scale = float(rng.uniform(1, 4))
        x = shifted(rng, (n_rows, n_cols), "float16", scale)
        cases.append(_case(sub, x, "float16", f"float16 ({n_rows}, {n_cols}), randn * {scale:.2f} "
                           f"+ shift", rng.seed))
    run_cases(credit, cases)


@pytest.mark.check("softmax_triton.float32_input")
def test_float32_input(student, rng, credit):
    sub = student()
    cases = []
    for n_rows, n_cols in ((5, 781), (3, 1024), (4, 130)):
        x = shifted(rng, (n_rows, n_cols), "float32", float(rng.uniform(1, 4)))
        cases.append(_case(sub, x, "float32", f"float32 ({n_rows}, {n_cols})", rng.seed))
    run_cases(credit, cases)


@pytest.mark.check("softmax_triton.strided_rows")
def test_strided_rows(student, rng, credit):
    sub = student()
    # a column slice x[:, :500] of a (6, 781) tensor: its row stride is 781, not 500, while the
    # output the wrapper allocates is contiguous (row stride 500)
    x = shifted(rng, (6, 500), "float16", 2.0)
    case = "float16 x[:, :500] of a (6, 781) tensor: x.stride(0) = 781, the output's is 500"
    # through run_cases: an exception (an assert on contiguous input) names this strided case
    run_cases(credit, [(f"{case} [seed {rng.seed}]", lambda: _strided(sub, x, case, rng.seed))])


def _strided(sub, x, case, seed):
    r = call_softmax(sub, x, "float16", pad_cols=281)
    stores = [o for o in r.extras.get("out_of_bounds", []) if o["access"] == "tl.store"]
    try:
        assert_close(r.value, reference.softmax(x, axis=1), what="softmax(x)", dtype="float16",
                     case=case, seed=seed)
    except CheckFailed as e:
        if stores:
            raise CheckFailed(f"{e}. Your stores went past the end of the output "
                              f"({stores[0]['line']}): the rows of out were addressed with x's "
                              f"row stride.", hint=(
                "The output is a new contiguous tensor: its row stride is out.stride(0) = "
                "n_cols, not x.stride(0). Pass the output's own stride to the kernel for the "
                "store, and x.stride(0) for the load.")) from None
        raise CheckFailed(str(e), hint=(
            "x is a column slice here: row r starts at r * x.stride(0), not r * n_cols. Pass "
            "x.stride(0) to the kernel for the load, and the output's own stride for the "
            "store.")) from None


@pytest.mark.check("softmax_triton.masked_accesses")
def test_masked_accesses(student, rng):
    sub = student()
    # n_cols below the block: each row's tile has padded lanes, and the last row's run past x
    for n_rows, n_cols in ((4, 130), (3, 781), (2, 3)):
        x = randn(rng, (n_rows, n_cols), "float16", 2.0)
        r = call_softmax(sub, x, "float16")
        case = f"softmax(x) (float16 ({n_rows}, {n_cols}), BLOCK {block_of(n_cols)}) [seed {rng.seed}]"
        assert_in_bounds(r.extras, ["x"], case, MASK_HINTS)
        # staying in bounds by storing nothing (a stub) earns nothing
        assert_kernel_wrote(r.extras, r.value, x.size, case, "softmax_kernel")


@pytest.mark.check("softmax_triton.fp16_scaled_rows")
def test_fp16_scaled_rows(student, rng, credit):
    sub = student()
    cases = []
    for n_rows, n_cols in ((6, 781), (3, 130)):
        x = rng.standard_normal((n_rows, n_cols))
        # Break It 1 says fp16 rows * 20 overflow exp (float16's exp does above 11.09). But
        # tl.exp takes only fp32/fp64, so a Triton kernel exponentiates in float32, which
        # overflows only above 88.7, and randn * 20 over 781 columns tops out near 65. So the
        # later rows also carry a few entries between 4.6 and 6 sigma: times 20 they pass 92,
        # and exp(x) without the max is inf there (then inf / inf = nan).
        for row in range(n_rows // 2, n_rows):
            spikes = rng.choice(n_cols, size=min(3, n_cols), replace=False)
            x[row, spikes] = rng.uniform(4.6, 6.0, size=spikes.size)
        x = round_to(x * 20, "float16")
        case = (f"float16 ({n_rows}, {n_cols}), randn * 20; rows {n_rows // 2} to {n_rows - 1} "
                f"reach {x.max():.0f}")
        cases.append((f"{case} [seed {rng.seed}]",
                       lambda x=x, case=case: run_softmax(sub, x, "float16", case, rng.seed,
                                                          what="softmax(x * 20)")))
    run_cases(credit, cases)


@pytest.mark.check("softmax_triton.all_negative_rows")
def test_all_negative_rows(student, rng, credit):
    sub = student()
    cases = []
    # every value below 0, and n_cols < BLOCK so some lanes of each row are padding
    for n_rows, n_cols in ((4, 781), (3, 130), (5, 3)):
        near = -np.abs(rng.standard_normal((n_rows, n_cols))) - rng.uniform(0.05, 1)
        far = rng.standard_normal((n_rows, n_cols)) * 5 - 50   # like x - 50
        for name, x in (("-|randn| - c", near), ("randn * 5 - 50", far)):
            x = round_to(x, "float16")
            cases.append(_case(sub, x, "float16", f"float16 ({n_rows}, {n_cols}), BLOCK "
                               f"{block_of(n_cols)}, all negative: {name}", rng.seed))
    run_cases(credit, cases)


@pytest.mark.check("softmax_triton.uses_kernel")
def test_uses_kernel(student, rng):
    # The gate (grader.fixtures.Gated) records torch ops below the dispatcher, so torch.softmax
    # shows as _softmax and the eager version as max/sub/exp/sum/div; the audit refuses NumPy,
    # threads and processes in this exercise. The answer must also be right: a kernel that
    # computes nothing (a stub with its raise deleted) earns nothing here either.
    sub = student()
    x = randn(rng, (3, 256), "float16", 2)
    r = call_softmax(sub, x, "float16")
    assert_kernel_wrote(r.extras, r.value, x.size, "softmax(x)", "softmax_kernel")
    assert_shape(r.value, x.shape, what="softmax(x)", dtype="float16")


# ------------------------------------------------------------------------------- gpu, perf
# Real sizes on CUDA (mode "cuda"). Inputs are drawn by torch's generator in the worker and
# again here (grader.judge.gpu.seeded_inputs), references and comparisons run on the GPU here.

BANDWIDTH_SHAPE = (32768, 4096)   # 256 MiB of fp16: far past any L2
# (dtype, shape, scale): scale None draws one in [1, 6]; the last case is Break It 1 at a real
# size: values past 88, so exp without the max overflows even in float32
GPU_SHAPES = (("float16", (4096, 781), None), ("bfloat16", (1823, 4096), None),
              ("float32", (2000, 1000), None), ("float16", (65, 16384), None),
              ("float16", (1000, 781), 40.0), ("float16", (1000, 781), -8.0))
# a negative scale: -|randn| * 8, every value of every row negative (the padding loaded as 0
# would then be each row's max: Break It 3 at a real size)


@pytest.mark.check("softmax_triton.gpu_real_sizes")
def test_gpu_real_sizes(student, rng, gpu, credit):
    from grader.judge import gpu as g

    sub = student()

    def run(dtype, shape, scale):
        (marker,), (x,) = g.seeded_inputs(rng, shape, dtype, count=1, scale=scale,
                                          guard=block_of(shape[1]), absolute=scale < 0)
        # through the gate: a launch, no computing torch op, and (profiler) no device kernel
        # but the student's Triton kernels and copies, from any thread of the worker
        r = sub.call("softmax", marker, opts={"poison_empty": True, "sync": True, "return_args": True})
        case = (f"{dtype} {shape}, randn * {scale:.1f}" if scale > 0 else
                f"{dtype} {shape}, -|randn| * {-scale:.1f} (every value negative)")
        g.assert_close_gpu(r.value, g.softmax_reference(x), what="softmax(x)", dtype=dtype,
                           case=case, seed=rng.seed)
        g.assert_unchanged(r.extras["args_after"][0], x, f"x ({case})")

    cases = []
    for dtype, shape, scale in GPU_SHAPES:
        scale = scale or float(rng.uniform(1, 6))
        label = f"randn * {scale:.1f}" if scale > 0 else f"-|randn| * {-scale:.1f}"
        cases.append((f"{dtype} {shape}, {label} [seed {rng.seed}]",
                      lambda dtype=dtype, shape=shape, scale=scale: run(dtype, shape, scale)))
    run_cases(credit, cases)


def _sanitizer_call(sub, device: str) -> None:
    """softmax at 781 columns (not a power of two, so BLOCK_SIZE has 243 padded lanes), seeded
    inputs the worker draws itself, the answer checked here."""
    import torch

    from grader.judge.inputs import seeded, torch_randn

    shape, seed = (37, 781), int(np.random.default_rng().integers(0, 2**31 - 1))
    got = sanitize.gated_call(sub, "softmax_triton", "softmax", seeded(shape, "float16", device, seed))
    if not sanitize.close_enough(got, torch.softmax(torch_randn(shape, "float16", device, seed).float(), -1)):
        raise sanitize.wrong_answer("softmax_triton", "softmax", SANITIZER_TARGET)


SANITIZER_TARGET = sanitize.Target("x of shape (37, 781) float16", _sanitizer_call)


@pytest.mark.check("softmax_triton.sanitizer")
def test_sanitizer(student, gpu):
    if sanitize.sanitizer_path() is None:
        pytest.skip("compute-sanitizer is not installed on this machine (it comes with the CUDA toolkit)")
    sanitize.memcheck(student().directory, "softmax_triton")


def _eager(x):
    """The lesson's softmax_eager, run here as the baseline (the student's copy could be slowed)."""
    m = x.max(dim=1, keepdim=True).values
    e = (x - m).exp()
    return e / e.sum(dim=1, keepdim=True)


@pytest.mark.check("softmax_triton.bandwidth")
def test_bandwidth(student, rng, gpu, credit, workers):
    from grader.judge import gpu as g
    from grader.judge import timing
    from grader.judge.devices import linear_credit

    sub = student()
    rows, cols = BANDWIDTH_SHAPE
    what = f"softmax(x) on {rows} x {cols} float16"
    (marker,), (x,) = g.seeded_inputs(rng, (rows, cols), "float16", count=1)
    moved = 2 * x.numel() * x.element_size()          # read every element once, write it once
    # Every timed call refills x with fresh values first and reduces its output to a checksum
    # after (grader.judge.timing): the same per-call costs for the student and for the PyTorch
    # runs below. Those costs are taken out as measured here with nothing of the student alive;
    # the student cannot skip them, since every request's outputs are verified afterwards.
    note = timing.quiet_gpu(workers, what)
    harness = timing.per_call_ms(timing.local_request(lambda t: t, [x.clone()]))
    eager = timing.per_call_ms(timing.local_request(_eager, [x.clone()]))
    traced = sub.call("softmax", marker, opts={"trace": True})
    assert_kernel_computed(traced.extras, what, "softmax_kernel[(n_rows,)](...)",
                           "the max, exp, sum and divide")
    g.assert_close_gpu(traced.value, g.softmax_reference(x), what="softmax(x)", dtype="float16",
                       case=f"{rows} x {cols}", seed=rng.seed)
    # the gate's profiler (CUPTI) stays attached to the process it ran in and slows every later
    # launch there: the timed requests run in a fresh worker
    sub.close()
    reqs = timing.Requests(sub, "softmax", [marker], rng=rng, inputs=[x], dtype="float16",
                           reference=lambda i: g.softmax_reference(i[0]), what="softmax(x)")
    mine = timing.per_call_ms(reqs)
    reqs.verify()
    # cross-check the baseline with the student's workers stopped again: it can only have been
    # slowed, never sped up, so the faster of the two counts
    timing.quiet_gpu(workers, what)
    eager = min(eager, timing.per_call_ms(timing.local_request(_eager, [x.clone()])))
    # the harness cost too, again: one stalled measurement (seen once on the H200: 82 ms) must
    # not be subtracted; the smaller of the two takes less off the student's time, never more
    harness = min(harness, timing.per_call_ms(timing.local_request(lambda t: t, [x.clone()])))
    mine, eager = mine - harness, eager - harness
    copy = gpu.ceiling("copy_gbs")
    impossible = timing.below_floor(mine, moved / copy / 1e6, what)
    if impossible:
        raise CheckFailed(impossible)
    gbs = moved / mine / 1e6
    fraction, speedup = gbs / copy, eager / mine
    p = gpu.profile
    score = (0.5 * linear_credit(fraction, p.softmax_full_fraction, p.softmax_zero_fraction)
             + 0.5 * linear_credit(speedup, p.eager_speedup_full, p.eager_speedup_zero))
    credit.set(score, f"softmax on {rows} x {cols} float16: {mine:.3f} ms = {gbs:.0f} GB/s "
               f"(bytes = 2 x rows x cols x 2), {fraction:.0%} of the copy bandwidth measured in "
               f"this run ({copy:.0f} GB/s; full marks from {p.softmax_full_fraction:.0%}); "
               f"{speedup:.1f}x faster than softmax_eager ({eager:.3f} ms; full marks from "
               f"{p.eager_speedup_full:g}x); every timed call's output checked "
               f"(per call, {harness:.3f} ms of refill and checksum taken out){note}")
