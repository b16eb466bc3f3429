"""Checks for exercises/flash_triton.py (lesson: "FlashAttention's forward pass", "Build It"
flash_triton.py, "Break It" 2 and 3).

The kernel runs under the Triton interpreter (TRITON_INTERPRET=1, CPU tensors) in these layers,
so shapes are small and few: each (query block, key block) step costs a few ms there. Every
check draws fresh inputs from `rng` (float16, one float32 case; the interpreter's tl.dot has no
bfloat16), computes the float64 reference here from the exact rounded values, and compares the
whole (B, H, N, D) output; its dtype must be the input dtype.

Memory behind the inputs: the wrapper's reshape(B*H, N, D).contiguous() of a contiguous input is
a view, so an unmasked K/V load of the last key block reads the next head's rows, and past the
last head whatever lies behind the tensor. Every input here carries a guard band of
max(BLOCK_M, BLOCK_N) * D elements (the furthest an unmasked tile can reach), so what an
unmasked load reads is chosen by the check: NaN where the masks are the point (ragged_n,
guard_bands), zeros elsewhere, so that each check fails for its own idea only.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.judge import reference
from grader.judge.compare import CheckFailed, assert_close, assert_shape
from grader.judge.inputs import randn, round_to, tensor
from grader.judge.kernel_use import assert_kernel_computed


def _qkv(rng, shape, dtype="float16", scale=1.0):
    """q, k, v: (B, H, N, D) arrays holding values exact in `dtype`."""
    return tuple(randn(rng, shape, dtype, scale) for _ in range(3))


def _flash(sub, q, k, v, *, dtype="float16", poison=float("nan"), BLOCK_M=64, BLOCK_N=64,
           case="", seed=None):
    """Run flash_fwd on (q, k, v) with guard bands of `poison` and check the whole output."""
    D = q.shape[-1]
    guard = max(BLOCK_M, BLOCK_N) * D
    args = [tensor(t, dtype, guard=guard, poison=poison) for t in (q, k, v)]
    out = sub.flash_fwd(*args, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    B, H, N, _ = q.shape
    case = ", ".join(x for x in (f"B={B}, H={H}, N={N}, D={D}, BLOCK_M={BLOCK_M}, "
                                 f"BLOCK_N={BLOCK_N}, {dtype}", case) if x)
    assert_close(out, reference.attention(q, k, v), what="flash_fwd(q, k, v)", dtype=dtype,
                 case=case, seed=seed)


@pytest.mark.check("flash_triton.matches_reference")
def test_matches_reference(student, rng):
    sub = student()
    # every case has N > BLOCK_N, so the online softmax really merges several key blocks
    cases = [  # (B, H, N, D), dtype, blocks
        ((2, 2, 80, 16), "float16", dict(BLOCK_M=64, BLOCK_N=32)),
        ((2, 3, 48, 32), "float16", dict(BLOCK_M=32, BLOCK_N=16)),
        ((1, 2, 64, 64), "float16", dict(BLOCK_M=32, BLOCK_N=32)),
        ((2, 1, 40, 128), "float16", dict(BLOCK_M=16, BLOCK_N=16)),
        ((1, 2, 72, 32), "float32", dict(BLOCK_M=32, BLOCK_N=32)),
    ]
    for shape, dtype, blocks in cases:
        q, k, v = _qkv(rng, shape, dtype)
        _flash(sub, q, k, v, dtype=dtype, poison=0.0, seed=rng.seed, **blocks)


@pytest.mark.check("flash_triton.ragged_n")
def test_ragged_n(student, rng):
    sub = student()
    cases = [  # (B, H, N, D), blocks; NaN behind every input, so an unmasked tail shows
        ((1, 1, 1000, 16), dict(BLOCK_M=64, BLOCK_N=64)),   # 15 full key blocks and 40 keys
        ((1, 2, 17, 32), dict(BLOCK_M=64, BLOCK_N=64)),     # N smaller than one block
        ((1, 1, 1, 16), dict(BLOCK_M=64, BLOCK_N=64)),      # a single query and key
        ((1, 2, 100, 16), dict(BLOCK_M=32, BLOCK_N=64)),    # BLOCK_M < BLOCK_N
        ((1, 1, 100, 32), dict(BLOCK_M=64, BLOCK_N=16)),    # BLOCK_M > BLOCK_N
    ]
    for shape, blocks in cases:
        q, k, v = _qkv(rng, shape)
        _flash(sub, q, k, v, case="NaN behind the inputs", seed=rng.seed, **blocks)


@pytest.mark.check("flash_triton.guard_bands")
def test_guard_bands(student, rng):
    sub = student()
    # Only the last (batch, head) ends at the poison: the others' tails run into the next
    # head's rows. One head with a short last block, then several heads and several blocks.
    cases = [
        ((1, 1, 100, 16), dict(BLOCK_M=64, BLOCK_N=64)),    # the last block holds 36 keys of 64
        ((2, 2, 50, 16), dict(BLOCK_M=32, BLOCK_N=32)),
    ]
    for shape, blocks in cases:
        q, k, v = _qkv(rng, shape)
        _flash(sub, q, k, v, case="NaN right behind q, k and v in memory", seed=rng.seed,
               **blocks)


@pytest.mark.check("flash_triton.padded_keys_masked")
def test_padded_keys_masked(student, rng):
    sub = student()
    # Every real score is negative (q > 0, k < 0 in every coordinate): a padded key loaded as
    # zeros scores 0, above all of them, and without the -inf it takes most of the weight.
    # Zeros behind the inputs: an unmasked load reads the same zeros as a masked one, so this
    # check fails for the missing -inf only.
    cases = [
        ((1, 2, 17, 16), dict(BLOCK_M=64, BLOCK_N=64)),     # 47 padded keys
        ((1, 1, 100, 16), dict(BLOCK_M=32, BLOCK_N=64)),    # 28 padded keys in the last block
    ]
    for shape, blocks in cases:
        q = round_to(np.abs(rng.standard_normal(shape)) + 0.5, "float16")
        k = round_to(-np.abs(rng.standard_normal(shape)) - 0.5, "float16")
        v = randn(rng, shape, "float16")
        _flash(sub, q, k, v, poison=0.0, case="all real scores < 0", seed=rng.seed, **blocks)


@pytest.mark.check("flash_triton.max_in_last_block")
def test_max_in_last_block(student, rng):
    sub = student()
    # Break It 2: coordinate 0 adds 4 * 8 / sqrt(16) = 8 to the scores of the keys in the last
    # key block only, so every row's max moves there at the last step and the earlier blocks'
    # weights must shrink by ~e^-6: exactly what acc * alpha does.
    cases = [
        ((1, 2, 100, 16), dict(BLOCK_M=64, BLOCK_N=32)),    # last block: keys 96..99
        ((1, 1, 128, 16), dict(BLOCK_M=32, BLOCK_N=64)),    # last block: keys 64..127
    ]
    for shape, blocks in cases:
        q, k, v = _qkv(rng, shape)
        N, block_n = shape[2], blocks["BLOCK_N"]
        last = (N - 1) // block_n * block_n
        q[..., 0] = 4.0
        k[..., 0] = 0.0
        k[..., last:, 0] = 8.0
        _flash(sub, q, k, v, poison=0.0, seed=rng.seed,
               case=f"row max in the last key block, keys {last}..{N - 1}", **blocks)


@pytest.mark.check("flash_triton.large_scores")
def test_large_scores(student, rng):
    sub = student()
    # q, k ~ 10 * randn, D = 16: scores ~ +-100 and row maxima ~ 250, past float32 exp's
    # overflow at 88.7, so exp(s) without the running max is inf and inf / inf is nan.
    shape = (1, 2, 100, 16)
    q, k = (randn(rng, shape, "float16", 10.0) for _ in range(2))
    v = randn(rng, shape, "float16")
    _flash(sub, q, k, v, poison=0.0, BLOCK_M=64, BLOCK_N=32,
           case="q, k scaled by 10: scores up to ~300", seed=rng.seed)


@pytest.mark.check("flash_triton.uses_kernel")
def test_uses_kernel(student, rng):
    sub = student()
    q, k, v = _qkv(rng, (1, 2, 40, 16))
    r = sub.call("flash_fwd", *(tensor(t, "float16") for t in (q, k, v)), opts={"trace": True})
    assert_kernel_computed(r.extras, "flash_fwd(q, k, v)", "_flash_fwd[grid](...)", "the attention")
    # the values are the other checks' business; here only that a tensor came back
    assert_shape(r.value, q.shape, what="flash_fwd(q, k, v)", dtype="float16")


# ------------------------------------------------------------------------------- gpu, perf
# Real sizes on CUDA (mode "cuda"). Inputs are drawn by torch's generator in the worker and
# again here (grader.judge.gpu.seeded_inputs), so N = 16K needs no transfer of inputs; the reference
# (float32, a block of query rows at a time) and the comparison run on the GPU here.

# (B, H, N, D, dtype): the lesson's shape up to 16K, then ragged N, several D, bf16, B and H > 1
GPU_CASES = ((1, 32, 16384, 128, "float16"), (1, 32, 4096, 128, "bfloat16"),
             (1, 8, 1000, 64, "float16"), (2, 4, 4097, 64, "bfloat16"),
             (2, 3, 777, 32, "float16"), (1, 2, 33, 16, "float16"))
GUARD_ROWS = 256   # poison behind each input: more than any tile an unmasked load can reach


@pytest.mark.check("flash_triton.gpu_real_sizes")
def test_gpu_real_sizes(student, rng, gpu):
    from grader.judge import gpu as g

    sub = student()
    for B, H, N, D, dtype in GPU_CASES:
        case = f"{dtype} (B, H, N, D) = ({B}, {H}, {N}, {D})"
        markers, (q, k, v) = g.seeded_inputs(rng, (B, H, N, D), dtype, guard=GUARD_ROWS * D)
        small = N <= 4097   # send the inputs back to check them only where that is cheap
        r = sub.call("flash_fwd", *markers,
                     opts={"poison_empty": True, "sync": True, "return_args": small, "trace": True})
        # on the GPU too: a wrapper that switches to PyTorch on CUDA earns nothing
        assert_kernel_computed(r.extras, f"flash_fwd(q, k, v) ({case})", "_flash_fwd[grid](...)",
                               "the attention")
        g.assert_close_gpu(r.value, g.attention_reference(q, k, v), what="flash_fwd(q, k, v)",
                           dtype=dtype, case=case, seed=rng.seed)
        if small:
            for name, after, before in zip("qkv", r.extras["args_after"], (q, k, v)):
                g.assert_unchanged(after, before, f"{name} ({case})")
        del q, k, v
    # Break It 3 at a real size: q > 0 and k < 0, so every real score is negative and a padded
    # key scored 0 instead of -inf would take most of the weight
    B, H, N, D = 1, 4, 1000, 64
    markers, (q, k, v) = g.seeded_inputs(rng, (B, H, N, D), "float16", scale=(0.5, -0.5, 1.0),
                                         guard=GUARD_ROWS * D, absolute=True)
    out = sub.call("flash_fwd", *markers, opts={"poison_empty": True, "sync": True}).value
    g.assert_close_gpu(out, g.attention_reference(q, k, v), what="flash_fwd(q, k, v)", dtype="float16",
                       case=f"float16 ({B}, {H}, {N}, {D}), q > 0 > k: every real score negative",
                       seed=rng.seed)


@pytest.mark.check("flash_triton.sanitizer")
def test_sanitizer(student, gpu):
    from grader.sandbox import sanitize

    if sanitize.sanitizer_path() is None:
        pytest.skip("compute-sanitizer is not installed on this machine (it comes with the CUDA toolkit)")
    sanitize.memcheck(student().directory, "flash_triton")


PERF_N = (2048, 8192, 16384)
EXTRA_MIB_ALLOWED = 64   # beyond the output: a few numbers per row, plus allocator rounding
B_PERF, H_PERF, D_PERF = 1, 32, 128


def _sdpa_ms(q, k, v) -> tuple[float, str]:
    """The fastest SDPA backend that runs here, timed in this process on the same inputs, in the
    same harness as the student's calls (q refilled before each call, a checksum after)."""
    import math

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from grader.judge import timing

    best = (float("inf"), "none")
    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
        try:
            with sdpa_kernel(backend):
                ms = timing.per_call_ms(timing.local_request(F.scaled_dot_product_attention,
                                                             [q.clone(), k, v]))
        except RuntimeError:
            continue
        best = min(best, (ms, backend.name))
    torch.cuda.empty_cache()
    if not math.isfinite(best[0]) or best[0] <= 0:   # fail closed: no baseline, no credit
        raise CheckFailed(f"no SDPA backend ran on (B, H, N, D) = {tuple(q.shape)} float16 here, so "
                          f"there is no baseline to compare with; no speed points")
    return best


def _flash_requests(sub, rng, markers, tensors, blocks, what):
    from grader.judge import gpu as g
    from grader.judge import timing

    return timing.Requests(sub, "flash_fwd", markers, kwargs=blocks, rng=rng, inputs=tensors,
                           dtype="float16", what=what,
                           reference=lambda i: g.attention_reference(*i))


@pytest.mark.check("flash_triton.speed_vs_sdpa")
def test_speed_vs_sdpa(student, rng, gpu, credit, workers):
    from grader import errors
    from grader.judge import gpu as g
    from grader.judge import timing
    from grader.judge.devices import flash_smem_bytes, linear_credit

    sub = student()
    prof = gpu.profile
    inputs = {N: g.seeded_inputs(rng, (B_PERF, H_PERF, N, D_PERF), "float16") for N in PERF_N}
    # the baselines first, with nothing of the student's alive (timing.quiet_gpu)
    note = timing.quiet_gpu(workers, "flash_triton.speed_vs_sdpa")
    base = {N: _sdpa_ms(*tensors) for N, (_, tensors) in inputs.items()}
    # the student's kernel takes BLOCK_M and BLOCK_N (the lesson's signature): try the tile
    # shapes this chip's profile lists at N = 8K, keep the fastest (Measure: "the best values
    # depend on the chip's shared memory size, which is why real kernels autotune")
    markers, tensors = inputs[8192]
    tried, wrong = {}, []
    # (the student's wrapper launches with Triton's default num_stages, 3)
    pairs = dict.fromkeys((c[0], c[1]) for c in prof.flash_configs
                          if flash_smem_bytes(c[0], c[1], 3) <= prof.smem_per_block)
    for bm, bn in pairs:
        blocks = {"BLOCK_M": bm, "BLOCK_N": bn}
        reqs = _flash_requests(sub, rng, markers, tensors, blocks,
                               f"flash_fwd(q, k, v, BLOCK_M={bm}, BLOCK_N={bn}) at N=8192")
        try:
            ms = timing.per_call_ms(reqs, target_ms=60)
        except errors.StudentRaised:   # e.g. out of resources: shared memory (Break It 5)
            continue
        try:
            reqs.verify()              # a tile shape is chosen only for outputs that are right
        except CheckFailed as e:
            wrong.append(str(e))
            continue
        tried[(bm, bn)] = ms
    if not tried:
        if wrong:
            raise CheckFailed(wrong[0])
        sub.flash_fwd(*markers)   # let the student's own error surface with its message
        raise CheckFailed(f"flash_fwd failed with every tile shape tried: {prof.flash_configs}")
    bm, bn = min(tried, key=tried.get)
    blocks = {"BLOCK_M": bm, "BLOCK_N": bn}
    mine = {}
    for N in PERF_N:
        markers, tensors = inputs[N]
        what = f"flash_fwd(q, k, v) at N={N}"
        traced = sub.call("flash_fwd", *markers, opts={"trace": True}, **blocks)
        assert_kernel_computed(traced.extras, what, "_flash_fwd[grid](...)", "the attention")
        g.assert_close_gpu(traced.value, g.attention_reference(*tensors), what="flash_fwd(q, k, v)",
                           dtype="float16", case=f"N={N}", seed=rng.seed)
        reqs = _flash_requests(sub, rng, markers, tensors, blocks, what)
        mine[N] = timing.per_call_ms(reqs)
        reqs.verify()
    # cross-check: the baselines again with the student's workers stopped; a disturbed baseline
    # can only be slower, so the faster of the two counts
    timing.quiet_gpu(workers, "flash_triton.speed_vs_sdpa")
    fractions, lines = [], []
    for N in PERF_N:
        again = _sdpa_ms(*inputs[N][1])
        base_ms, backend = min(base[N], again)
        flops = 4 * B_PERF * H_PERF * N * N * D_PERF
        impossible = timing.below_floor(mine[N], flops / gpu.ceiling("matmul_tflops") / 1e9,
                                        f"flash_fwd(q, k, v) at N={N}")
        if impossible:
            raise CheckFailed(impossible)
        ratio = mine[N] / base_ms
        fractions.append(linear_credit(ratio, prof.flash_full_ratio, prof.flash_zero_ratio))
        lines.append(f"N={N}: {mine[N]:.3f} ms ({flops / mine[N] / 1e9:.0f} TFLOP/s) vs SDPA "
                     f"{backend} {base_ms:.3f} ms = {ratio:.2f}x")
    credit.set(sum(fractions) / len(fractions),
               f"BLOCK_M={bm}, BLOCK_N={bn} (fastest of {sorted(tried)}); " + "; ".join(lines)
               + f". Full marks within {prof.flash_full_ratio:g}x of the fastest SDPA backend, "
               f"none past {prof.flash_zero_ratio:g}x; FLOPs = 4*B*H*N^2*D; both timed with q "
               f"refilled before and a checksum after every call, and every timed output "
               f"checked{note}")


@pytest.mark.check("flash_triton.memory_flat")
def test_memory_flat(student, rng, gpu, credit):
    from grader.judge import gpu as g

    sub = student()
    passed, lines = 0, []
    for N in PERF_N:
        shape = (B_PERF, H_PERF, N, D_PERF)
        markers, tensors = g.seeded_inputs(rng, shape, "float16")
        # a request like every timed one, its outputs verified: memory points need right answers
        reqs = _flash_requests(sub, rng, markers, tensors, {}, f"flash_fwd(q, k, v) at N={N}")
        r = reqs.call(int(rng.integers(3, 13)))
        reqs.verify()
        out_bytes = B_PERF * H_PERF * N * D_PERF * 2
        extra = int(r.extras["cuda_peak_bytes"]) - out_bytes
        allowed = max(EXTRA_MIB_ALLOWED * g.MIB, out_bytes // 10)
        naive = 2 * B_PERF * H_PERF * N * N * 2     # S and P in fp16, what naive would add
        passed += extra <= allowed
        lines.append(f"N={N}: {extra / g.MIB:.1f} MiB beyond the output (allowed "
                     f"{allowed / g.MIB:.0f} MiB; naive would add {naive / 2**30:.1f} GiB)")
        del tensors
    credit.set(passed / len(PERF_N), "; ".join(lines))
