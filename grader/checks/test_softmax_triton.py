"""Checks for exercises/softmax_triton.py (lesson: "Writing a kernel: Triton", Build It
softmax_triton.py, Break It 1).

The kernel runs under Triton's interpreter on CPU tensors (mode "interp"). Every input is drawn
fresh from `rng`, rounded here to the dtype the kernel sees, and followed in memory by a guard
band of NaN as long as one block: a load that reads past the end of the last row (a missing
mask) pulls NaN into that row, since the interpreter itself never reports it. References are
float64, computed here from the exact input values.

Shapes stay small (a few rows) because the interpreter runs one program at a time in Python.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.judge import reference
from grader.judge.compare import CheckFailed, assert_close, assert_shape
from grader.judge.inputs import randn, round_to, tensor
from grader.judge.kernel_use import assert_kernel_computed

# (n_rows, n_cols): 781 and 1000 are not powers of two, 130 leaves half of its 256-lane block
# padded, 1 is a block of one lane, 1024 fills its block exactly
SHAPES = ((5, 781), (4, 130), (3, 1), (3, 1024), (2, 1000))
DTYPES = ("float32", "float16")



def block_of(n_cols: int) -> int:
    """The tile a one-row-per-program kernel needs: the next power of two >= n_cols."""
    return 1 << max(n_cols - 1, 0).bit_length()


def run_softmax(sub, x: np.ndarray, dtype: str, case: str, seed: int, what: str = "softmax(x)",
                pad_cols: int = 0):
    """Send x (exact values in `dtype`) with a block of NaN behind it; compare every element.

    poison_empty: torch.empty in the wrapper hands out NaN, so an output element the kernel
    never stores stays NaN instead of whatever the allocator had there. pad_cols: x is a column
    slice of a wider tensor, NaN in the columns past its end (row stride = n_cols + pad_cols)."""
    got = sub.call("softmax", tensor(x, dtype, guard=block_of(x.shape[1]), pad_cols=pad_cols),
                   opts={"poison_empty": True}).value
    assert_close(got, reference.softmax(x, axis=1), what=what, dtype=dtype, case=case, seed=seed)


@pytest.mark.check("softmax_triton.matches_float64")
def test_matches_float64(student, rng):
    sub = student()
    for dtype in DTYPES:
        for n_rows, n_cols in SHAPES:
            scale = float(rng.uniform(1, 4))
            x = randn(rng, (n_rows, n_cols), dtype, scale)
            run_softmax(sub, x, dtype, f"{dtype} ({n_rows}, {n_cols}), randn * {scale:.2f}",
                        rng.seed)
        # a column slice x[:, :500] of a (6, 781) tensor: the row stride is 781, not 500
        x = randn(rng, (6, 500), dtype, 2.0)
        run_softmax(sub, x, dtype, f"{dtype} x[:, :500] of a (6, 781) tensor: row stride 781",
                    rng.seed, pad_cols=281)


@pytest.mark.check("softmax_triton.fp16_scaled_rows")
def test_fp16_scaled_rows(student, rng):
    sub = student()
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
        run_softmax(sub, x, "float16", f"float16 ({n_rows}, {n_cols}), randn * 20; rows "
                    f"{n_rows // 2} to {n_rows - 1} reach {x.max():.0f}", rng.seed,
                    what="softmax(x * 20)")


@pytest.mark.check("softmax_triton.all_negative_rows")
def test_all_negative_rows(student, rng):
    sub = student()
    for dtype in DTYPES:
        # every value below 0, and n_cols < BLOCK so some lanes of each row are padding
        for n_rows, n_cols in ((4, 781), (3, 130), (5, 3)):
            near = -np.abs(rng.standard_normal((n_rows, n_cols))) - rng.uniform(0.05, 1)
            far = rng.standard_normal((n_rows, n_cols)) * 5 - 50   # like x - 50
            for name, x in (("-|randn| - c", near), ("randn * 5 - 50", far)):
                x = round_to(x, dtype)
                run_softmax(sub, x, dtype, f"{dtype} ({n_rows}, {n_cols}), BLOCK "
                            f"{block_of(n_cols)}, all negative: {name}", rng.seed)


@pytest.mark.check("softmax_triton.uses_kernel")
def test_uses_kernel(student, rng):
    # Torch ops are recorded below the dispatcher, so torch.softmax shows as _softmax and the
    # eager version as max/sub/exp/sum/div. Arithmetic done in NumPy (x.numpy()) dispatches
    # nothing and is not seen here.
    sub = student()
    x = randn(rng, (3, 130), "float32", 2)
    r = sub.call("softmax", tensor(x, "float32", guard=block_of(130)), opts={"trace": True})
    assert_kernel_computed(r.extras, "softmax(x)", "softmax_kernel[(n_rows,)](...)",
                           "the max, exp, sum and divide")
    # the values are matches_float64's business; here only that a tensor came back
    assert_shape(r.value, x.shape, what="softmax(x)", dtype="float32")


# ------------------------------------------------------------------------------- gpu, perf
# Real sizes on CUDA (mode "cuda"). Inputs are drawn by torch's generator in the worker and
# again here (grader.judge.gpu.seeded_inputs), references and comparisons run on the GPU here.

BANDWIDTH_SHAPE = (32768, 4096)   # 256 MiB of fp16: far past any L2
# (dtype, shape, scale): scale None draws one in [1, 6]; the last case is Break It 1 at a real
# size: values past 88, so exp without the max overflows even in float32
GPU_SHAPES = (("float16", (4096, 781), None), ("bfloat16", (1823, 4096), None),
              ("float32", (2000, 1000), None), ("float16", (65, 16384), None),
              ("float16", (1000, 781), 40.0))


@pytest.mark.check("softmax_triton.gpu_real_sizes")
def test_gpu_real_sizes(student, rng, gpu):
    from grader.judge import gpu as g

    sub = student()
    for dtype, shape, scale in GPU_SHAPES:
        scale = scale or float(rng.uniform(1, 6))
        (marker,), (x,) = g.seeded_inputs(rng, shape, dtype, count=1, scale=scale,
                                          guard=block_of(shape[1]))
        r = sub.call("softmax", marker,
                     opts={"poison_empty": True, "sync": True, "return_args": True, "trace": True})
        case = f"{dtype} {shape}, randn * {scale:.1f}"
        # on the GPU too: a wrapper that switches to PyTorch on CUDA earns nothing
        assert_kernel_computed(r.extras, f"softmax(x) ({case})", "softmax_kernel[(n_rows,)](...)",
                               "the max, exp, sum and divide")
        g.assert_close_gpu(r.value, g.softmax_reference(x), what="softmax(x)", dtype=dtype,
                           case=case, seed=rng.seed)
        g.assert_unchanged(r.extras["args_after"][0], x, f"x ({case})")


@pytest.mark.check("softmax_triton.sanitizer")
def test_sanitizer(student, gpu):
    from grader.sandbox import sanitize

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
    reqs = timing.Requests(sub, "softmax", [marker], rng=rng, inputs=[x], dtype="float16",
                           reference=lambda i: g.softmax_reference(i[0]), what="softmax(x)")
    mine = timing.per_call_ms(reqs)
    reqs.verify()
    # cross-check the baseline with the student's workers stopped again: it can only have been
    # slowed, never sped up, so the faster of the two counts
    timing.quiet_gpu(workers, what)
    eager = min(eager, timing.per_call_ms(timing.local_request(_eager, [x.clone()])))
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
