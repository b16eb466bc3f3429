"""gpu checks for exercises/softmax_triton.py: real sizes on CUDA (mode "cuda"), and
compute-sanitizer's memcheck (the call it runs is kernel.py's TARGET).

Inputs are drawn by torch's generator in the worker and again here
(grader.judge.answers.gpu.seeded_inputs), references and comparisons run on the GPU here.
"""

from __future__ import annotations

import pytest

from grader.exercises.softmax_triton.judging import block_of
from grader.judge.answers.cases import run_cases
from grader.judge.evidence import sanitize

# (dtype, shape, scale): scale None draws one in [1, 6]; the last case is Break It 1 at a real
# size: values past 88, so exp without the max overflows even in float32
GPU_SHAPES = (("float16", (4096, 781), None), ("bfloat16", (1823, 4096), None),
              ("float32", (2000, 1000), None), ("float16", (65, 16384), None),
              ("float16", (1000, 781), 40.0), ("float16", (1000, 781), -8.0))
# a negative scale: -|randn| * 8, every value of every row negative (the padding loaded as 0
# would then be each row's max: Break It 3 at a real size)


@pytest.mark.check("softmax_triton.gpu_real_sizes")
def test_gpu_real_sizes(student, rng, gpu, credit):
    from grader.judge.answers import gpu as g

    run_cases(credit, g.row_softmax_cases(student(), rng, GPU_SHAPES, block_of))


@pytest.mark.check("softmax_triton.sanitizer")
def test_sanitizer(student, gpu):
    if sanitize.sanitizer_path() is None:
        pytest.skip("compute-sanitizer is not installed on this machine (it comes with the CUDA toolkit)")
    sanitize.memcheck(student().directory, "softmax_triton")
