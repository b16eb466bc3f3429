"""The one table: exercises, layers, checks, points and hints.

Every graded check is a pytest test marked `@pytest.mark.check("<id>")` whose id is a row here;
the pytest plugin (`grader.plugin`) looks the row up for points, layer and hint. Nothing about
scoring is written anywhere else. The core track's public checks add up to 100 points
(`public_total()`); extension-track exercises (`Exercise.track`) add points of their
own (`public_total("extension")`). Instructor-only checks
(`hidden_tests/`) add their own rows through `hidden_tests/checks.py`, marked hidden.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Exercise:
    name: str
    title: str
    needs: frozenset          # Python packages the exercise's worker needs: numpy, torch, triton
    mode: str                 # worker mode for the cpu/adversarial/interp layers
    track: str = "core"       # "core": the 100 public points; "extension": points of its own
    # The kernel-use gate (grader.fixtures.Gated, judge/kernel_use.py): every graded function
    # that must compute with the student's Triton kernels, as {function: (call, launch, work)}
    # for the messages, and the torch ops its wrapper may run beyond allocations, views and copies.
    kernels: dict = dataclasses.field(default_factory=dict)
    extra_ops: frozenset = frozenset()
    # The static audit's rules (judge/audit.py): "numpy" (the general rules), "triton" (the whole
    # file under the Triton rules), "mixed" (a NumPy part, and the code `kernels` reaches under
    # the Triton rules).
    audit: str = "numpy"


# ops a wrapper may run to size its launch (flash_decode: seq_lens.max().item() picks the split
# count); they compute no attention
SIZE_OPS = frozenset({"max", "amax", "min", "amin", "_local_scalar_dense", "clamp", "clamp_min",
                      "clamp_max"})


@dataclass(frozen=True)
class Layer:
    name: str
    title: str
    needs: frozenset          # what the machine must have: torch, triton, cuda


@dataclass(frozen=True)
class Check:
    id: str                   # "<exercise>.<what>"
    layer: str
    points: float
    title: str
    hint: str                 # the lesson idea to revisit when it fails
    hidden: bool = False
    # ids of more specific checks whose idea explains this one's failure: when one of them fails
    # too, the report lists this check under it ("probably the same cause"), not as its own lead
    follows: tuple = ()

    @property
    def exercise(self) -> str:
        return self.id.split(".", 1)[0]


EXERCISES = {e.name: e for e in [
    Exercise("online_softmax", "Online softmax (NumPy)", frozenset({"numpy"}), "cpu"),
    Exercise("tiled_attention", "Tiled attention (NumPy)", frozenset({"numpy"}), "cpu"),
    Exercise("softmax_triton", "Fused softmax (Triton)", frozenset({"torch", "triton"}), "interp",
             kernels={"softmax": ("softmax(x)", "softmax_kernel[(n_rows,)](...)",
                                  "the max, exp, sum and divide")},
             audit="triton"),
    Exercise("flash_triton", "FlashAttention forward (Triton)", frozenset({"torch", "triton"}), "interp",
             kernels={"flash_fwd": ("flash_fwd(q, k, v)", "_flash_fwd[grid](...)", "the attention")},
             audit="triton"),
    Exercise("bench_attn", "Benchmarking attention", frozenset({"torch"}), "cpu"),
    # both kernels (split and merge) may run; merge_partials is its NumPy part
    Exercise("flash_decode", "Flash-Decoding (NumPy + Triton)", frozenset({"numpy", "torch", "triton"}),
             "interp", track="extension",
             kernels={"flash_decode": ("flash_decode(q, k_cache, v_cache, seq_lens)",
                                       "_decode_split[grid](...) and _decode_merge[grid](...)",
                                       "the attention and the merge")},
             extra_ops=SIZE_OPS, audit="mixed"),
    Exercise("attention_backward", "Causal attention, the logsumexp and the backward pass (NumPy)",
             frozenset({"numpy"}), "cpu", track="extension"),
    # the forward with L, the backward's three kernels, and the autograd wrapper
    Exercise("flash_backward", "Causal FlashAttention with L, and its backward pass (Triton)",
             frozenset({"torch", "triton"}), "interp", track="extension",
             kernels={
                 "flash_fwd": ("flash_fwd(q, k, v, causal)", "_flash_fwd[grid](...)",
                               "the attention and L"),
                 "flash_bwd": ("flash_bwd(q, k, v, o, lse, do, causal)",
                               "_bwd_preprocess, _bwd_dkdv and _bwd_dq[grid](...)", "the gradients"),
                 "flash_attention": ("flash_attention(q, k, v, causal).backward(g)",
                                     "flash_fwd's and flash_bwd's kernels",
                                     "the attention and its gradients"),
             },
             audit="triton"),
]}

LAYERS = {l.name: l for l in [
    Layer("cpu", "NumPy and CPU numerics", frozenset()),
    Layer("adversarial", "Break It cases", frozenset()),
    Layer("interp", "Triton kernels under the interpreter", frozenset({"torch", "triton"})),
    Layer("gpu", "Correctness at real sizes on the GPU", frozenset({"torch", "triton", "cuda"})),
    Layer("perf", "Speed and memory against PyTorch", frozenset({"torch", "triton", "cuda"})),
]}

_C = Check
CHECKS: list[Check] = [
    # ---------------------------------------------------------------- online_softmax (16)
    _C("online_softmax.safe_matches_float64", "cpu", 2, "softmax_safe matches a float64 softmax (float64 input)",
       "Safe softmax: three passes, m = max(x), l = sum(exp(x - m)), out = exp(x - m) / l."),
    _C("online_softmax.online_max_sum", "cpu", 2, "online_max_sum returns the (m, l) of x (float64 input)",
       "Online softmax: m_new = max(m, x); l = l * exp(m - m_new) + exp(x - m_new); start at "
       "m = -inf, l = 0. Is m updated every step, and l rescaled when it moves?"),
    _C("online_softmax.one_pass", "cpu", 2, "online_max_sum reads x once, in order",
       "Online softmax is one pass: one element at a time, a running max m and a running sum l "
       "rescaled by exp(m_old - m_new) when m moves. x.max() then exp(x - m).sum() is two passes.",
       follows=("online_softmax.online_max_sum",)),
    _C("online_softmax.online_matches_float64", "cpu", 2, "softmax_online matches a float64 softmax (float64 input)",
       "Online softmax: one pass for (m, l), then out = exp(x - m) / l.",
       follows=("online_softmax.online_max_sum",)),
    _C("online_softmax.merge_chunks", "cpu", 3, "seven uneven chunks' (m, l) merged in any order give the whole row's",
       "The merge rule: m = max(ma, mb); l = la * exp(ma - m) + lb * exp(mb - m). Both sums "
       "must be rescaled to the new max before adding.",
       follows=("online_softmax.merge_empty_identity",)),
    _C("online_softmax.merge_empty_identity", "cpu", 1, "merging with the empty state (-inf, 0) changes nothing",
       "The empty state (m = -inf, l = 0) is the identity of merge: exp(-inf) = 0 makes the "
       "empty sum vanish; watch for -inf - (-inf) = nan when both sides are empty."),
    _C("online_softmax.empty_input", "adversarial", 1, "online_max_sum of an empty x is the empty state (-inf, 0)",
       "Start from the empty state m = -inf, l = 0.0, not from x[0]: n = 0 returns it unchanged."),
    _C("online_softmax.no_overflow", "adversarial", 1, "[1000, 1001, 1002] gives no inf or nan",
       "Safe softmax: subtract the row max before exp, so no exponent is positive and "
       "nothing overflows (exp(1000) is inf even in float64, and inf / inf is NaN).",
       follows=("online_softmax.online_max_sum",)),
    _C("online_softmax.single_element", "adversarial", 1, "a single element has softmax 1 and state (x, 1)",
       "A single element: m = x[0], l = exp(0) = 1, softmax [1.0]. Does a loop or a slice skip it?",
       follows=("online_softmax.online_max_sum", "online_softmax.empty_input")),
    _C("online_softmax.low_precision_input", "adversarial", 1, "float16 and float32 input, scores past exp's overflow",
       "float16 exp overflows above 11.09 and float32 above 88.7: subtract the max, and "
       "accumulate in float32 or float64; any float output at least as precise as x is fine.",
       follows=("online_softmax.safe_matches_float64", "online_softmax.online_matches_float64",
                "online_softmax.online_max_sum", "online_softmax.no_overflow")),
    # ---------------------------------------------------------------- tiled_attention (16)
    _C("tiled_attention.naive_matches_float64", "cpu", 2, "naive_attention matches a float64 reference",
       "Attention: S = Q K^T / sqrt(d), P = safe softmax of each row of S, O = P V."),
    _C("tiled_attention.tiled_matches_float64", "cpu", 3, "tiled_attention matches a float64 reference (N a multiple of Br and Bc)",
       "The block rule: per query block keep m, l, acc; for each key block s = q k^T * scale, "
       "m_new = max(m, rowmax(s)), p = exp(s - m_new), alpha = exp(m - m_new), l = l*alpha + "
       "rowsum(p), acc = acc*alpha + p v; at the end O = acc / l."),
    _C("tiled_attention.ragged_sizes", "cpu", 3, "tiled_attention on ragged sizes: N = 1, N < Br, N a multiple of neither block, Br != Bc",
       "Slices past N are shorter: the last query block has N - i rows and the last key block "
       "N - j keys. Slice with Q[i:i + Br], never assume a full block.",
       follows=("tiled_attention.tiled_matches_float64",)),
    _C("tiled_attention.memory_is_tiled", "cpu", 3, "peak memory stays near the output plus a few Br x Bc tiles, also outside tracemalloc",
       "Tiling: never build anything bigger than a Br x Bc score tile (no N x N scores, no "
       "row of N scores); S and P exist only a tile at a time (that is the whole point of "
       "FlashAttention), and the only N-sized array is the output.",
       follows=("tiled_attention.tiled_matches_float64", "tiled_attention.ragged_sizes")),
    _C("tiled_attention.max_in_last_block", "adversarial", 2, "correct when the row max sits in the last key block",
       "Break It 2: right until the row max moves into a later key block. Is acc rescaled by "
       "alpha, as l is?",
       follows=("tiled_attention.tiled_matches_float64", "tiled_attention.ragged_sizes")),
    _C("tiled_attention.large_scores", "adversarial", 2, "scores large enough to overflow exp without the max subtracted (naive and tiled)",
       "The running max is what keeps exp from overflowing: p = exp(s - m_new), never exp(s); "
       "naive_attention subtracts each row's max.",
       follows=("tiled_attention.naive_matches_float64", "tiled_attention.tiled_matches_float64",
                "tiled_attention.ragged_sizes", "tiled_attention.max_in_last_block")),
    _C("tiled_attention.negative_scores", "adversarial", 1, "rows whose scores are all far below 0 (naive and tiled)",
       "The running max starts at -inf, not 0, and the softmax subtracts each row's own max: "
       "with every score far below 0, exp(s) underflows to 0 and l = 0.",
       follows=("tiled_attention.naive_matches_float64", "tiled_attention.tiled_matches_float64",
                "tiled_attention.ragged_sizes", "tiled_attention.max_in_last_block",
                "tiled_attention.large_scores")),
    # ---------------------------------------------------------------- softmax_triton (18)
    # Every check of a Triton exercise passes only when the student's kernel computed the answer
    # (grader.fixtures.Gated, grader.judge.audit); `uses_kernel` is the check that says so.
    _C("softmax_triton.uses_kernel", "adversarial", 1, "softmax launches its Triton kernel, which stores the whole output",
       "softmax(x) must compute with softmax_kernel and store every output element; calling "
       "torch.softmax or exp inside the wrapper, or a kernel that stores nothing, earns nothing."),
    _C("softmax_triton.masked_accesses", "adversarial", 1, "no load or store past the end of a row (n_cols < BLOCK)",
       "Mask the load and the store with mask = cols < n_cols: without it the last row reads "
       "and writes past the end of the tensor, even when the result happens to look right.",
       follows=("softmax_triton.uses_kernel",)),
    _C("softmax_triton.all_negative_rows", "adversarial", 2, "rows of only negative numbers with n_cols < BLOCK",
       "The padded lanes must load as -inf (other=-inf): with other=0 a row of negatives gets "
       "max 0 and every padded lane adds exp(0) = 1 to the sum.",
       follows=("softmax_triton.uses_kernel", "softmax_triton.masked_accesses",
                "softmax_triton.matches_float64")),
    _C("softmax_triton.matches_float64", "interp", 2, "softmax matches float64 on awkward shapes (float16, contiguous)",
       "One program per row: load the row (other=-inf past n_cols), subtract the max, exp, "
       "sum, divide in float32, and store in the output's dtype.",
       follows=("softmax_triton.uses_kernel", "softmax_triton.masked_accesses")),
    _C("softmax_triton.float32_input", "interp", 1, "softmax of float32 input gives float32 output",
       "The kernel takes float16, bfloat16 and float32 rows: compute in float32 and store in the "
       "output's dtype (out_ptr.dtype.element_ty); nothing may assume a 16-bit input.",
       follows=("softmax_triton.uses_kernel", "softmax_triton.masked_accesses",
                "softmax_triton.all_negative_rows", "softmax_triton.matches_float64")),
    _C("softmax_triton.strided_rows", "interp", 1, "a row-strided input (x[:, :500] of a wider tensor)",
       "Row r of x starts at r * x.stride(0), and row r of the contiguous output at "
       "r * out.stride(0): pass both strides to the kernel.",
       follows=("softmax_triton.uses_kernel", "softmax_triton.masked_accesses",
                "softmax_triton.all_negative_rows", "softmax_triton.matches_float64")),
    _C("softmax_triton.fp16_scaled_rows", "adversarial", 3,
       "float16 rows scaled by 20, some entries past 88, give no inf or nan",
       "Break It 1: exp overflows above 11.09 in float16 and above 88.7 in float32, and "
       "inf / inf is nan. Subtract the row max (in float32) before tl.exp.",
       follows=("softmax_triton.uses_kernel", "softmax_triton.masked_accesses",
                "softmax_triton.all_negative_rows", "softmax_triton.matches_float64")),
    _C("softmax_triton.gpu_real_sizes", "gpu", 3, "softmax on the GPU at real sizes, fp16/bf16/fp32",
       "Mask every load and store; keep the max, exp and sum in float32; the row stride comes "
       "from x.stride(0).",
       follows=("softmax_triton.uses_kernel", "softmax_triton.masked_accesses",
                "softmax_triton.all_negative_rows", "softmax_triton.matches_float64",
                "softmax_triton.float32_input", "softmax_triton.strided_rows",
                "softmax_triton.fp16_scaled_rows")),
    _C("softmax_triton.sanitizer", "gpu", 1, "compute-sanitizer finds no out-of-bounds access",
       "Every tl.load and tl.store of a row needs mask = cols < n_cols, even when the result "
       "happens to look right.", follows=("softmax_triton.masked_accesses",)),
    _C("softmax_triton.bandwidth", "perf", 3, "softmax GB/s against the copy bandwidth, and its speed-up over softmax_eager",
       "A fused softmax reads each element once and writes it once: it should approach the "
       "copy bandwidth, and beat the eager version by about the ratio of HBM passes.",
       follows=("softmax_triton.uses_kernel", "softmax_triton.gpu_real_sizes")),
    # ---------------------------------------------------------------- flash_triton (34)
    _C("flash_triton.uses_kernel", "adversarial", 1, "flash_fwd launches its Triton kernel, which stores the whole output",
       "flash_fwd must compute with _flash_fwd and store every output element; calling SDPA, "
       "matmul or softmax from PyTorch, or a kernel that stores nothing, earns nothing."),
    _C("flash_triton.guard_bands", "adversarial", 3, "no load or store past the end of q, k, v or the output",
       "Break It 3: a K or V load without mask= reads past the end of the tensor, and an O "
       "store without mask= writes past it; every lane of every access is checked here.",
       follows=("flash_triton.uses_kernel",)),
    _C("flash_triton.matches_reference", "interp", 5, "flash_fwd matches float64 for B, H > 1, D in {16, 32, 64, 128}",
       "FlashAttention forward: q tile once; per K/V block s = dot(q, k) * scale, m_new, "
       "p = exp(s - m_new), alpha = exp(m_i - m_new), l_i = l_i*alpha + sum(p), acc = "
       "acc*alpha + dot(p, v), m_i = m_new; finally acc / l_i. Is the 1/sqrt(D) scale there?",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands")),
    _C("flash_triton.max_in_last_block", "adversarial", 2, "correct when the row max sits in the last key block",
       "Break It 2 on the GPU kernel: when the row max moves to a later block, what was summed "
       "must move to the new max: alpha = exp(m_i - m_new), acc * alpha[:, None] before adding "
       "dot(p, v), l_i * alpha, then m_i = m_new.",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands",
                "flash_triton.matches_reference", "flash_triton.large_scores")),
    _C("flash_triton.large_scores", "adversarial", 2, "scores that overflow exp, and scores that are all strongly negative",
       "The running max keeps exp in range: start it at -inf (not 0) and use p = exp(s - "
       "m_new[:, None]), never exp(s).",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands",
                "flash_triton.matches_reference")),
    _C("flash_triton.float32_input", "interp", 1, "flash_fwd on float32 input gives float32 output",
       "The kernel must take float32 too: cast p to v's dtype before tl.dot and store in "
       "O.dtype.element_ty; nothing may assume a 16-bit input.",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands",
                "flash_triton.matches_reference", "flash_triton.max_in_last_block",
                "flash_triton.large_scores")),
    _C("flash_triton.padded_keys_masked", "adversarial", 2, "padded keys get no weight",
       "Break It 3, second half: padded keys loaded as zeros still score 0, not -inf, and "
       "exp(0 - m) gives them real weight. Set s to -inf where cols >= N with tl.where.",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands",
                "flash_triton.matches_reference", "flash_triton.max_in_last_block",
                "flash_triton.large_scores")),
    _C("flash_triton.ragged_n", "interp", 4, "N not a multiple of BLOCK_N, N smaller than a block, BLOCK_M != BLOCK_N",
       "The last blocks are partial: the key loop must reach the partial block (range(0, N, "
       "BLOCK_N)), the grid must hold cdiv(N, BLOCK_M) query blocks, keys past N score -inf, "
       "and the Q load and O store are masked on rows < N.",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands",
                "flash_triton.padded_keys_masked", "flash_triton.matches_reference",
                "flash_triton.max_in_last_block", "flash_triton.large_scores")),
    _C("flash_triton.gpu_real_sizes", "gpu", 5, "flash_fwd on the GPU: N up to 16K, ragged N, several D, fp16 and bf16",
       "Mask loads on cols < N and rows < N, -inf for padded scores, rescale acc by alpha, "
       "divide by l_i at the end, and store in the output dtype.",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands",
                "flash_triton.padded_keys_masked", "flash_triton.matches_reference",
                "flash_triton.max_in_last_block", "flash_triton.large_scores",
                "flash_triton.ragged_n", "flash_triton.float32_input")),
    _C("flash_triton.sanitizer", "gpu", 2, "compute-sanitizer finds no out-of-bounds access",
       "Break It 3: every tl.load and tl.store past the end of a tensor needs a mask, even "
       "when the result happens to look right.", follows=("flash_triton.guard_bands",)),
    _C("flash_triton.speed_vs_sdpa", "perf", 5, "flash_fwd within 1.5-3x of the fastest SDPA backend",
       "Measure: tiles of 64 or 128, num_warps 4 or 8, a cast of p to the input dtype before "
       "tl.dot so the tensor cores run; the best tiles depend on the chip's shared memory.",
       follows=("flash_triton.uses_kernel", "flash_triton.gpu_real_sizes")),
    _C("flash_triton.memory_flat", "perf", 2, "extra memory of flash_fwd stays flat in N",
       "FlashAttention never writes S or P: beyond the output its extra memory is a few "
       "numbers per row, at every N.",
       follows=("flash_triton.uses_kernel", "flash_triton.gpu_real_sizes")),
    # ---------------------------------------------------------------- bench_attn (16)
    _C("bench_attn.backend_probe", "cpu", 2, "probe_backends reports each SDPA backend as working (with a time) or not",
       "Task 5: call sdpa under each sdpa_kernel(backend), catch RuntimeError, and record "
       "the time of those that run.",
       follows=("bench_attn.honest_timing",)),
    _C("bench_attn.honest_timing", "adversarial", 4, "time_proper: warm-up, rep timed calls each synchronised, median, against the grader's clock",
       "Break It 4c: warm up (the first call compiles), then time rep calls, sync() before "
       "starting the clock and after fn() (kernels launch asynchronously), and return the "
       "median in milliseconds."),
    _C("bench_attn.dishonest_timers", "adversarial", 2, "time_once_no_sync shows the compile, time_warm_no_sync only the launch",
       "Break It 4a and 4b: one cold call without sync measures the compile; after warm-up, "
       "one call without sync measures only the launch. Neither synchronises."),
    _C("bench_attn.sweep_rows", "cpu", 3, "run_sweep rows: one per N and impl, ms timed, tflops from ms, written as JSON",
       "Each row: N, impl, ms from time_proper on that impl at that N, tflops = "
       "4*B*H*N^2*D / ms / 1e9, peak_gb from peak_bytes; one row per (N, impl), written to "
       "out_path as JSON.",
       follows=("bench_attn.honest_timing",)),
    _C("bench_attn.oom_recorded", "adversarial", 2, "an out-of-memory run is recorded as None and the sweep goes on",
       "Catch torch.OutOfMemoryError per run, record ms/tflops/peak_gb as None, free the "
       "memory and go on with the next impl and N.",
       follows=("bench_attn.sweep_rows", "bench_attn.honest_timing")),
    _C("bench_attn.gpu_sweep", "gpu", 3, "the sweep on the GPU: naive memory grows ~4x per doubling, flash stays flat",
       "Naive attention writes S and P (N^2 each): its peak grows 4x per doubling of N; "
       "SDPA and yours keep only the output. peak_bytes: reset the peak, run, "
       "max_memory_allocated() minus the base.",
       follows=("bench_attn.sweep_rows", "bench_attn.oom_recorded", "bench_attn.honest_timing")),
    # ------------------------------------------------- flash_decode (extension track, 40)
    _C("flash_decode.merge_matches_one_pass", "cpu", 4,
       "merge_partials of uneven splits, in any order, equals attention over all the keys",
       "The merge rule: m = max(m_a, m_b); l = l_a*exp(m_a - m) + l_b*exp(m_b - m); acc the "
       "same way; o = acc / l once, at the end. Both states must be rescaled to the new max."),
    _C("flash_decode.merge_empty_split", "adversarial", 2,
       "a split with no keys, (-inf, 0, 0), changes nothing; all splits empty gives o = 0",
       "The empty state (-inf, 0, 0) is the identity of the merge rule: exp(-inf) = 0 makes it "
       "vanish, but -inf - (-inf) is nan when both sides are empty: shift by 0 there. A row "
       "with no keys at all has o = 0.", follows=("flash_decode.merge_matches_one_pass",)),
    _C("flash_decode.matches_reference", "interp", 5,
       "flash_decode matches float64 at full lengths, D in {64, 128}, several splits, fp16 and fp32",
       "Same trick, opposite axis: each program runs _flash_fwd's block rule over its split of "
       "the keys (s = dot(q, k) * scale, m_new, p, alpha, l_i, acc) and stores (m, l, acc); the "
       "merge kernel combines the splits with the merge rule and divides by l once.",
       follows=("flash_decode.max_in_last_split", "flash_decode.large_scores",
                "flash_decode.padded_keys_masked")),
    _C("flash_decode.ragged_lengths", "interp", 4,
       "seq_lens of 1, not multiples of the split or block size, different per sequence",
       "Each sequence attends to its own first seq_lens[b] keys: a split covers [lo, min(lo + "
       "split_size, seq_len)), loads are masked on cols < seq_len and scores past it are -inf.",
       follows=("flash_decode.padded_keys_masked", "flash_decode.empty_splits",
                "flash_decode.max_in_last_split", "flash_decode.large_scores",
                "flash_decode.uses_kernel")),
    _C("flash_decode.gqa_heads", "interp", 3,
       "grouped-query attention: query head h reads KV head h // (Hq // Hkv)",
       "GQA: the Hq / Hkv query heads of group g are g*GROUP .. g*GROUP + GROUP - 1 and all "
       "read KV head g (h // GROUP, not h % Hkv).",
       follows=("flash_decode.max_in_last_split", "flash_decode.padded_keys_masked",
                "flash_decode.large_scores")),
    _C("flash_decode.empty_splits", "adversarial", 2,
       "splits that hold no keys, and a sequence of length 0, give no nan",
       "The empty state is the identity: a split past seq_len must hand back (-inf, 0, 0) "
       "(its loop does not run), and the merge must never compute -inf - (-inf) = nan; a "
       "sequence of length 0 has o = 0.", follows=("flash_decode.padded_keys_masked",)),
    _C("flash_decode.padded_keys_masked", "adversarial", 3,
       "cache positions past seq_lens[b] hold garbage and get no weight",
       "Keys past seq_lens[b] belong to no one: mask the K and V loads on cols < seq_len AND "
       "set their scores to -inf (a zero key still scores 0 and gets weight exp(0 - m)).",
       follows=("flash_decode.large_scores",)),
    _C("flash_decode.max_in_last_split", "adversarial", 3,
       "correct when every head's max score sits in the last split",
       "The merge rule rescales: each split's l and acc are relative to its own max, so "
       "merging needs w = exp(m_split - m_max) on both. Right until the max moves to a later "
       "split: same as Break It 2, on the opposite axis."),
    _C("flash_decode.large_scores", "adversarial", 2,
       "scores up to ~300: exp overflows without the running max",
       "The running max keeps exp finite: p = exp(s - m_new), never exp(s), in every split; "
       "the merge's weights exp(m_split - m_max) are <= 1 too.",
       follows=("flash_decode.max_in_last_split",)),
    _C("flash_decode.uses_kernel", "adversarial", 1,
       "flash_decode computes with its Triton kernels",
       "The splits and the merge both run in Triton (_decode_split, _decode_merge): calling "
       "SDPA, matmul, softmax or a torch merge inside the wrapper earns nothing."),
    _C("flash_decode.gpu_real_sizes", "gpu", 4,
       "flash_decode on the GPU: B 1 to 16, L up to 32K, GQA, ragged lengths, fp16 and bf16",
       "Same trick, opposite axis: masks on cols < seq_len with -inf scores, h // GROUP for "
       "the KV head, empty splits as the identity, and the merge rule with rescaling.",
       follows=("flash_decode.matches_reference", "flash_decode.ragged_lengths",
                "flash_decode.gqa_heads", "flash_decode.empty_splits",
                "flash_decode.padded_keys_masked", "flash_decode.max_in_last_split",
                "flash_decode.large_scores")),
    _C("flash_decode.sanitizer", "gpu", 1, "compute-sanitizer finds no out-of-bounds access",
       "Mask every K and V load on cols < seq_len and every store on the rows that exist: a load "
       "past the end of the cache is a bug even when the -inf scores hide what it read.",
       follows=("flash_decode.ragged_lengths",)),
    _C("flash_decode.bandwidth", "perf", 4,
       "K and V bytes read per second against the copy bandwidth, L >= 32K",
       "Decoding is memory bound: read each K and V row once (one program per KV head serves "
       "its whole query group), split the keys so every SM streams, and pipeline the loads "
       "(num_stages); full marks at 0.6 of the copy bandwidth."),
    _C("flash_decode.splits_speedup", "perf", 2,
       "B = 1, L = 128K: num_splits=None at least 4x faster than num_splits=1",
       "Same trick, opposite axis: one sequence with few heads gives the GPU a handful of "
       "programs; splitting the keys gives it hundreds. Pick num_splits from the SM count."),
    # ------------------------------------------- attention_backward (extension track, 30)
    _C("attention_backward.forward_matches_float64", "cpu", 4,
       "tiled_attention_lse: O and L match float64 on ragged sizes, Br != Bc",
       "The forward pass's step 4: after the last key block, O = acc / l and L = m + log(l) "
       "for each row, one number per query row, for the backward pass.",
       follows=("attention_backward.lse_includes_m",)),
    _C("attention_backward.lse_includes_m", "adversarial", 3,
       "L = m + log(l) in the natural log, on scores near 512",
       "L = m + log(l): the log of the whole row's softmax denominator, with the running max m "
       "added back and the natural log, so that the backward's e^(S - L) is the exact P."),
    _C("attention_backward.causal_mask", "cpu", 4,
       "causal=True: j <= i, the diagonal block with Br != Bc, short last blocks; O and L",
       "Causal: query i sees keys j <= i. Skip blocks above the diagonal (every key after every "
       "query of the block) and mask s where j > i in every block that crosses the diagonal.",
       follows=("attention_backward.lse_includes_m", "attention_backward.forward_matches_float64")),
    _C("attention_backward.max_in_last_block", "adversarial", 2,
       "O and L when the row max sits in the last key block",
       "Break It 2 with L: rescale acc and l by alpha when the max moves; L = m + log(l) uses "
       "the final m and l.",
       follows=("attention_backward.lse_includes_m", "attention_backward.forward_matches_float64")),
    _C("attention_backward.backward_matches_float64", "cpu", 6,
       "tiled_backward: dQ, dK, dV match float64 analytic gradients (ragged, Br != Bc)",
       "Recompute instead of remember: per tile S = Q K^T * scale, P = e^(S - L); dV += P^T dO, "
       "dP = dO V^T, the D trick D = rowsum(dO o O), dS = P o (dP - D), dQ += dS K * scale, "
       "dK += dS^T Q * scale."),
    _C("attention_backward.backward_causal", "cpu", 3,
       "tiled_backward with causal=True: the same mask and skipped blocks as the forward",
       "The backward walks the same tiles as the forward: skip blocks above the diagonal and "
       "mask j > i in the blocks that cross it, so P is 0 there.",
       follows=("attention_backward.backward_matches_float64", "attention_backward.causal_mask")),
    _C("attention_backward.backward_finite_difference", "cpu", 2,
       "a few gradient entries match central differences of sum(O * dO)",
       "The gradients are those of attention itself: dV = P^T dO, and dQ, dK through "
       "dS = P o (dP - D) with the scale 1/sqrt(d).",
       follows=("attention_backward.backward_matches_float64", "attention_backward.backward_causal")),
    _C("attention_backward.backward_recomputes_from_L", "adversarial", 2,
       "P is rebuilt from the L given (L shifted per row), not from a running max",
       "Recompute instead of remember: P = e^(S - L) with the L you are given; no running max, "
       "no second pass over the row.",
       follows=("attention_backward.backward_matches_float64",)),
    _C("attention_backward.backward_large_scores", "adversarial", 1,
       "backward on scores near 800 (exp overflows even in float64)",
       "P = e^(S - L) keeps every exponent <= 0; never exp(S) alone.",
       follows=("attention_backward.backward_matches_float64",
                "attention_backward.backward_recomputes_from_L", "attention_backward.causal_mask",
                "attention_backward.backward_causal")),
    _C("attention_backward.memory_is_linear", "cpu", 3,
       "forward and backward hold nothing N x N (tracemalloc and the worker's resident memory)",
       "Recompute instead of remember: S and P exist one (Br, Bc) tile at a time in both passes; "
       "the only N-sized arrays are the outputs, L and D.",
       follows=("attention_backward.forward_matches_float64", "attention_backward.lse_includes_m",
                "attention_backward.causal_mask", "attention_backward.backward_matches_float64",
                "attention_backward.backward_causal")),
    # ------------------------------------------- flash_backward (extension track, 42)
    _C("flash_backward.forward_matches_float64", "interp", 4,
       "flash_fwd's o and L match float64: ragged N, BLOCK_M != BLOCK_N, fp16 and fp32",
       "The forward of the core exercise, plus one number per row for the backward pass: L = m + "
       "log(l), the logsumexp of the row's scaled scores (natural log), stored as float32.",
       follows=("flash_backward.lse_includes_m",)),
    _C("flash_backward.lse_includes_m", "adversarial", 3,
       "L = m + log(l) with large scores (row maxima ~100)",
       "L = m + log(l): l sums exp(s - m), so log(l) alone is off by m. If you compute in exp2, "
       "convert back to the natural log: L = (m2 + log2(l)) * ln(2)."),
    _C("flash_backward.causal_mask", "interp", 4,
       "causal flash_fwd (key j visible iff j <= i): ragged N, BLOCK_M != BLOCK_N both ways",
       "Key j is visible to query i iff j <= i, the diagonal included. Skip blocks above the "
       "diagonal: the key loop stops at min((pid_m + 1) * BLOCK_M, N), and only the blocks that "
       "cross the diagonal (with any BLOCK_M, BLOCK_N) are masked, on cols <= rows.",
       follows=("flash_backward.lse_includes_m", "flash_backward.forward_matches_float64")),
    _C("flash_backward.backward_matches_float64", "interp", 6,
       "flash_bwd's dq, dk, dv within 2x PyTorch's same-precision error: fp16 and fp32, ragged N",
       "Recompute instead of remember: P = exp(S - L) from the L the forward saved; dV = P^T dO; "
       "dP = dO V^T; the D trick, D = rowsum(dO * O) and dS = P * (dP - D); dQ = scale * dS K and "
       "dK = scale * dS^T Q."),
    _C("flash_backward.backward_causal", "interp", 4,
       "causal flash_bwd: ragged N, BLOCK_M != BLOCK_N both ways",
       "The backward masks P like the forward (key j visible iff j <= i) and skips blocks above "
       "the diagonal: the dK/dV program of a key block starts at the query block holding its "
       "first key, the dQ program of a query block stops its keys at the diagonal.",
       follows=("flash_backward.backward_matches_float64", "flash_backward.causal_mask")),
    _C("flash_backward.autograd_wrapper", "interp", 2,
       "flash_attention(q, k, v, causal).backward(g) gives o and the gradients, causal and not",
       "An autograd.Function: forward runs flash_fwd and saves q, k, v, o and L (recompute "
       "instead of remember: nothing N x N); backward runs flash_bwd and returns (dq, dk, dv, None).",
       follows=("flash_backward.forward_matches_float64", "flash_backward.lse_includes_m",
                "flash_backward.causal_mask", "flash_backward.backward_matches_float64",
                "flash_backward.backward_causal")),
    _C("flash_backward.gpu_real_sizes", "gpu", 5,
       "o, L and the gradients on the GPU: N up to 4K, causal, D 64 and 128, fp16 and bf16, B, H > 1",
       "The same kernels at real sizes: masks on rows < N and cols < N (and cols <= rows when "
       "causal) in every kernel, one writer per output element (or atomics), float32 "
       "accumulators, and dS = P * (dP - D) in float32, cast only for tl.dot.",
       follows=("flash_backward.forward_matches_float64", "flash_backward.lse_includes_m",
                "flash_backward.causal_mask", "flash_backward.backward_matches_float64",
                "flash_backward.backward_causal", "flash_backward.autograd_wrapper",
                "flash_backward.masked_accesses")),
    _C("flash_backward.sanitizer", "gpu", 1,
       "compute-sanitizer finds no out-of-bounds access in flash_fwd or flash_bwd (causal, N = 1000)",
       "Mask every load and store of all four kernels on the rows and keys that exist: a load past "
       "the end is a bug even when tl.where sets those scores to -inf afterwards.",
       follows=("flash_backward.masked_accesses",)),
    _C("flash_backward.forward_speed", "perf", 3,
       "flash_fwd against the fastest SDPA forward, N = 4K and 8K, causal and not",
       "Tiles that keep the tensor cores busy (BLOCK_M x BLOCK_N from the device's shared memory), "
       "exp2 with log2(e) folded into the scale, pipelined K and V loads (num_stages)."),
    _C("flash_backward.backward_speed", "perf", 3,
       "flash_bwd against the fastest SDPA backward, N = 4K and 8K, causal and not",
       "Recompute instead of remember, with big tiles: one program per key block for dK and dV, "
       "one per query block for dQ (no atomics), P from exp2 and L, and float32 accumulators."),
    _C("flash_backward.causal_skips_blocks", "perf", 2,
       "causal flash_fwd and flash_bwd take at most 0.6 of the non-causal time (N >= 4K)",
       "Skip blocks above the diagonal: the forward's and dQ's key loops stop at the diagonal, "
       "dK/dV's query loop starts there; only the blocks that cross it are masked.",
       follows=("flash_backward.forward_speed", "flash_backward.backward_speed")),
    _C("flash_backward.memory_linear", "perf", 2,
       "flash_fwd and flash_bwd allocate nothing N x N (peak CUDA memory beyond the outputs)",
       "Recompute instead of remember: the forward saves o and L, the backward recomputes P tile "
       "by tile; the only extra tensors are per-row numbers (L, D) and perhaps a float32 dQ."),
    _C("flash_backward.masked_accesses", "adversarial", 2,
       "every load and store of flash_fwd and flash_bwd stays inside its tensor (ragged N)",
       "Mask every load and store on the rows and keys that exist (rows < N, cols < N), in the "
       "forward and in all three backward kernels, even where tl.where sets the scores to -inf.",
       follows=("flash_backward.forward_matches_float64", "flash_backward.lse_includes_m",
                "flash_backward.causal_mask", "flash_backward.backward_matches_float64",
                "flash_backward.backward_causal")),
    _C("flash_backward.uses_kernel", "adversarial", 1,
       "flash_fwd and flash_bwd compute with their Triton kernels",
       "The wrappers only allocate and launch: the attention, L, D and the gradients are computed "
       "by your kernels."),
    _C("flash_backward.ds_precision", "adversarial", 2,
       "flash_bwd with a large dO (|dP| past float16's 65504, dS in range): fp16 in, fp32 inside",
       "Compute dP = dO V^T, dP - D and dS = P * (dP - D) in float32 (tl.dot accumulates in "
       "float32) and cast only the operand of tl.dot, dS, to float16: dP can pass float16's 65504 "
       "where dS does not.",
       follows=("flash_backward.backward_matches_float64",)),
]
del _C


def hidden_checks() -> list[Check]:
    """Rows declared by hidden_tests/checks.py, when the instructor's folder is present."""
    path = ROOT / "hidden_tests" / "checks.py"
    if not path.exists():
        return []
    spec = importlib.util.spec_from_file_location("hidden_tests_checks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [dataclasses.replace(c, hidden=True) for c in module.CHECKS]


def all_checks(include_hidden: bool = True) -> dict[str, Check]:
    rows = CHECKS + (hidden_checks() if include_hidden else [])
    return {c.id: c for c in rows}


def public_total(track: str = "core") -> float:
    """Points of the public checks of one track: the core's are 100, the extension's its own."""
    return sum(c.points for c in CHECKS if EXERCISES[c.exercise].track == track)
