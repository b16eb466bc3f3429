"""flash_backward's gpu checks: real sizes on CUDA (mode "cuda"), and compute-sanitizer.

q, k, v and dO are drawn by torch's generator in the worker and again here
(grader.judge.answers.gpu.seeded_inputs), so they need no transfer; the o and L that flash_bwd is given
are computed here (reference.given_o_lse) and sent. The references run here on the GPU
(judging.assert_forward_gpu, judging.assert_grads_gpu). The sanitizer's call is TARGET in
kernel.py."""

from __future__ import annotations

import pytest

from grader.exercises.flash_backward.judging import assert_forward_gpu, assert_grads_gpu
from grader.exercises.flash_backward.reference import given_o_lse, gpu_case
from grader.judge.answers.compare import CheckFailed, assert_close
from grader.judge.evidence import sanitize

# (B, H, N, D, dtype, causal): N >= 4K causal, D 64 and 128, fp16 and bf16, B and H > 1, ragged N
GPU_CASES = ((1, 16, 4096, 128, "float16", True), (1, 8, 2048, 128, "bfloat16", False),
             (2, 4, 1000, 64, "float16", False), (2, 3, 777, 64, "bfloat16", True),
             (1, 2, 33, 128, "float16", True))
AUTOGRAD_CASE = (2, 4, 1000, 64, "float16", True)
GUARD_ROWS = 256   # poison behind each input: more than any tile an unmasked load can reach


def _run(sub, rng, B, H, N, D, dtype, causal):
    """flash_fwd, then flash_bwd on the o and L computed here, at one real size."""
    from grader.judge.answers import gpu as g

    case = gpu_case(B, H, N, D, dtype, causal)
    guard = GUARD_ROWS * D
    markers, (q, k, v, do) = g.seeded_inputs(rng, (B, H, N, D), dtype, count=4, guard=guard)
    fwd = f"flash_fwd(q, k, v, causal={causal})"
    r = sub.call("flash_fwd", *markers[:3], causal=causal, opts={"poison_empty": True, "sync": True})
    ref_o, ref_lse = assert_forward_gpu(r.value, q, k, v, dtype, causal, fwd, case, rng.seed)
    del r
    (mo, ml), o = given_o_lse(ref_o, ref_lse, dtype, guard)
    small = N <= 1000   # send the inputs back to check them only where that is cheap
    bwd = f"flash_bwd(q, k, v, o, lse, do, causal={causal})"
    r = sub.call("flash_bwd", *markers[:3], mo, ml, markers[3], causal=causal,
                 opts={"poison_empty": True, "sync": True, "return_args": small})
    assert_grads_gpu(r.value, q, k, v, do, dtype, causal, bwd, case, rng.seed)
    if small:
        for name, after, before in zip(("q", "k", "v", "o", "lse", "do"), r.extras["args_after"],
                                       (q, k, v, o, ref_lse, do)):
            g.assert_unchanged(after, before, f"{name} ({case})")


def _autograd(sub, rng, B, H, N, D, dtype, causal):
    """The wrapper at a real size: its backward runs on autograd's device thread, which the
    profiler of the gate sees too."""
    from grader.judge.answers import gpu as g

    case = gpu_case(B, H, N, D, dtype, causal)
    markers, (q, k, v, do) = g.seeded_inputs(rng, (B, H, N, D), dtype, count=4, guard=GUARD_ROWS * D)
    what = f"flash_attention(q, k, v, causal={causal}).backward(g)"
    r = sub.call("flash_attention", *markers, causal=causal,
                 opts={"backward": {"grad_arg": 3}, "poison_empty": True, "sync": True})
    if not isinstance(r.value, tuple) or len(r.value) != 2:
        raise CheckFailed(f"{what}: the call returned no output and gradients")
    out, grads = r.value
    assert_close(out, g.attention_reference(q, k, v, causal=causal),
                 what=f"the output of {what}", dtype=dtype, case=case, seed=rng.seed,
                 baseline=g.same_precision_attention(q, k, v, causal))
    if any(t is None for t in grads):
        raise CheckFailed(f"{what}: no gradient reached q, k or v: FlashAttention.backward "
                          f"must return (dq, dk, dv, None)")
    assert_grads_gpu(grads, q, k, v, do, dtype, causal, what, case, rng.seed)


@pytest.mark.check("flash_backward.gpu_real_sizes")
def test_gpu_real_sizes(student, rng, gpu, credit):
    from grader.judge.answers.cases import run_cases

    sub = student()
    cases = [(f"{gpu_case(*c)} [seed {rng.seed}]", lambda c=c: _run(sub, rng, *c))
             for c in GPU_CASES]
    cases.append((f"{gpu_case(*AUTOGRAD_CASE)}, through flash_attention(...).backward(g) "
                  f"[seed {rng.seed}]", lambda: _autograd(sub, rng, *AUTOGRAD_CASE)))
    run_cases(credit, cases)


@pytest.mark.check("flash_backward.sanitizer")
def test_sanitizer(student, gpu):
    if sanitize.sanitizer_path() is None:
        pytest.skip("compute-sanitizer is not installed on this machine (it comes with the CUDA toolkit)")
    sanitize.memcheck(student().directory, "flash_backward")
