"""flash_triton's gpu checks: flash_fwd at real sizes on CUDA, and compute-sanitizer (the call it
watches is this folder's kernel.py, TARGET).
"""

from __future__ import annotations

import pytest

from grader.judge.answers.cases import run_cases
from grader.judge.evidence import sanitize
from grader.judge.answers.compare import assert_close

# Real sizes on CUDA (mode "cuda"). Inputs are drawn by torch's generator in the worker and
# again here (grader.judge.answers.gpu.seeded_inputs), so N = 16K needs no transfer of inputs; the reference
# (float32, a block of query rows at a time) and the comparison run on the GPU here.

# (B, H, N, D, dtype): the lesson's shape up to 16K, then ragged N, several D, bf16, B and H > 1
GPU_CASES = ((1, 32, 16384, 128, "float16"), (1, 32, 4096, 128, "bfloat16"),
             (1, 8, 1000, 64, "float16"), (2, 4, 4097, 64, "bfloat16"),
             (2, 3, 777, 32, "float16"), (1, 2, 33, 16, "float16"))
GUARD_ROWS = 256   # poison behind each input: more than any tile an unmasked load can reach


@pytest.mark.check("flash_triton.gpu_real_sizes")
def test_gpu_real_sizes(student, rng, gpu, credit):
    from grader.judge.answers import gpu as g

    sub = student()

    def run(B, H, N, D, dtype):
        case = f"{dtype} (B, H, N, D) = ({B}, {H}, {N}, {D})"
        markers, (q, k, v) = g.seeded_inputs(rng, (B, H, N, D), dtype, guard=GUARD_ROWS * D)
        small = N <= 4097   # send the inputs back to check them only where that is cheap
        # through the gate: a launch, no computing torch op, and (profiler) no device kernel
        # but the student's Triton kernels and copies, from any thread of the worker
        r = sub.call("flash_fwd", *markers,
                     opts={"poison_empty": True, "sync": True, "return_args": small})
        assert_close(r.value, g.attention_reference(q, k, v), what="flash_fwd(q, k, v)",
                     dtype=dtype, case=case, seed=rng.seed)
        if small:
            for name, after, before in zip("qkv", r.extras["args_after"], (q, k, v)):
                g.assert_unchanged(after, before, f"{name} ({case})")

    def padded():
        # Break It 3 at a real size: q > 0 and k < 0, so every real score is negative (about
        # -130: exp underflows in float32 unless the running max starts at -inf) and a padded
        # key scored 0 instead of -inf would take all of the weight
        B, H, N, D = 1, 4, 1000, 64
        markers, (q, k, v) = g.seeded_inputs(rng, (B, H, N, D), "float16", scale=(5.0, -5.0, 1.0),
                                             guard=GUARD_ROWS * D, absolute=True)
        out = sub.call("flash_fwd", *markers, opts={"poison_empty": True, "sync": True}).value
        assert_close(out, g.attention_reference(q, k, v), what="flash_fwd(q, k, v)",
                     dtype="float16", case=f"float16 ({B}, {H}, {N}, {D}), q > 0 > k: "
                     f"every real score strongly negative", seed=rng.seed)

    cases = [(f"{dtype} ({B}, {H}, {N}, {D}) [seed {rng.seed}]",
              lambda c=(B, H, N, D, dtype): run(*c)) for B, H, N, D, dtype in GPU_CASES]
    cases.append((f"float16 (1, 4, 1000, 64), every real score strongly negative [seed {rng.seed}]", padded))
    run_cases(credit, cases)


@pytest.mark.check("flash_triton.sanitizer")
def test_sanitizer(student, gpu):
    if sanitize.sanitizer_path() is None:
        pytest.skip("compute-sanitizer is not installed on this machine (it comes with the CUDA toolkit)")
    sanitize.memcheck(student().directory, "flash_triton")
