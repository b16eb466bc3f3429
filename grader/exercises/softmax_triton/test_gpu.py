"""gpu checks for exercises/softmax_triton.py: real sizes on CUDA (mode "cuda"), and
compute-sanitizer's memcheck (the call it runs is sanitizer.py's TARGET).

Inputs are drawn by torch's generator in the worker and again here
(grader.judge.gpu.seeded_inputs), references and comparisons run on the GPU here.
"""

from __future__ import annotations

import pytest

from grader.exercises.softmax_triton.judging import block_of
from grader.judge.cases import run_cases
from grader.sandbox import sanitize
from grader.judge.compare import assert_close

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


@pytest.mark.check("softmax_triton.sanitizer")
def test_sanitizer(student, gpu):
    if sanitize.sanitizer_path() is None:
        pytest.skip("compute-sanitizer is not installed on this machine (it comes with the CUDA toolkit)")
    sanitize.memcheck(student().directory, "softmax_triton")
