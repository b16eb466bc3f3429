"""gpu checks for exercises/softmax_long.py: real widths from 1 to 256K columns on CUDA (mode
"cuda"), with the student's own BLOCK, and compute-sanitizer's memcheck (the call it runs is
sanitizer.py's TARGET).

Inputs are drawn by torch's generator in the worker and again here (grader.judge.gpu
.seeded_inputs), fresh seeds per check; new tensors in the call are filled with NaN first
(poison_empty), so an element never stored fails; references (float64) and comparisons, of
every element, run on the GPU here.
"""

from __future__ import annotations

import pytest

from grader.exercises.softmax_long.judging import guard_of
from grader.judge.cases import run_cases
from grader.judge.compare import assert_close
from grader.sandbox import sanitize

# (dtype, shape, scale): scale None draws one in [1, 6]; widths from 1 to 256K, powers of two
# and ragged ones around them (16383, 16385, 32769, 65537, 100003, 262143); the last two are
# Break It 1 at a long width (values past 88) and rows where every value is negative
GPU_SHAPES = (("float16", (4096, 1), None), ("bfloat16", (3000, 7), None),
              ("float32", (2048, 256), None), ("float16", (1000, 781), None),
              ("bfloat16", (512, 4096), None), ("float16", (129, 16383), None),
              ("float32", (65, 16385), None), ("bfloat16", (33, 32769), None),
              ("float16", (17, 65536), None), ("float32", (9, 100003), None),
              ("float16", (5, 262144), None), ("bfloat16", (3, 262143), None),
              ("float32", (4, 262144), None),
              ("float16", (64, 65537), 40.0), ("bfloat16", (300, 3001), -8.0))


@pytest.mark.check("softmax_long.gpu_real_sizes")
def test_gpu_real_sizes(student, rng, gpu, credit):
    from grader.judge import gpu as g

    sub = student()

    def run(dtype, shape, scale):
        (marker,), (x,) = g.seeded_inputs(rng, shape, dtype, count=1, scale=scale,
                                          guard=guard_of(shape[1]),
                                          absolute=scale < 0)
        # through the gate: a launch, no computing torch op, and (profiler) no device kernel
        # but the student's Triton kernels and copies, from any thread of the worker
        r = sub.call("softmax", marker, opts={"poison_empty": True, "sync": True, "return_args": True})
        case = (f"{dtype} {shape}, randn * {scale:.1f}" if scale > 0 else
                f"{dtype} {shape}, -|randn| * {-scale:.1f} (every value negative)")
        assert_close(r.value, g.softmax_reference(x), what="softmax(x)", dtype=dtype,
                     case=case, seed=rng.seed)
        g.assert_unchanged(r.extras["args_after"][0], x, f"x ({case})")

    cases = []
    for dtype, shape, scale in GPU_SHAPES:
        scale = scale or float(rng.uniform(1, 6))
        label = f"randn * {scale:.1f}" if scale > 0 else f"-|randn| * {-scale:.1f}"
        cases.append((f"{dtype} {shape}, {label} [seed {rng.seed}]",
                      lambda dtype=dtype, shape=shape, scale=scale: run(dtype, shape, scale)))
    run_cases(credit, cases)


@pytest.mark.check("softmax_long.sanitizer")
def test_sanitizer(student, gpu):
    if sanitize.sanitizer_path() is None:
        pytest.skip("compute-sanitizer is not installed on this machine (it comes with the CUDA toolkit)")
    sanitize.memcheck(student().directory, "softmax_long")
