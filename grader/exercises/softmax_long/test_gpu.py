"""gpu checks for exercises/softmax_long.py: real widths from 1 to 256K columns on CUDA (mode
"cuda"), with the student's own BLOCK, and compute-sanitizer's memcheck (the call it runs is
kernel.py's TARGET).

Inputs are drawn by torch's generator in the worker and again here (grader.judge.answers.gpu
.seeded_inputs), fresh seeds per check; new tensors in the call are filled with NaN first
(poison_empty), so an element never stored fails; references (float64) and comparisons, of
every element, run on the GPU here.
"""

from __future__ import annotations

import pytest

from grader.exercises.softmax_long.judging import guard_of
from grader.judge.answers.cases import run_cases
from grader.judge.evidence import sanitize

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
    from grader.judge.answers import gpu as g

    run_cases(credit, g.row_softmax_cases(student(), rng, GPU_SHAPES, guard_of))


@pytest.mark.check("softmax_long.sanitizer")
def test_sanitizer(student, gpu):
    if sanitize.sanitizer_path() is None:
        pytest.skip("compute-sanitizer is not installed on this machine (it comes with the CUDA toolkit)")
    sanitize.memcheck(student().directory, "softmax_long")
