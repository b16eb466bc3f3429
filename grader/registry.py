"""The one table: exercises, layers, checks, points and hints.

Every graded check is a pytest test marked `@pytest.mark.check("<id>")` whose id is a row here;
the pytest plugin (`grader.plugin`) looks the row up for points, layer and hint. Nothing about
scoring is written anywhere else. Public checks add up to 100 points; instructor-only checks
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
    Exercise("softmax_triton", "Fused softmax (Triton)", frozenset({"torch", "triton"}), "interp"),
    Exercise("flash_triton", "FlashAttention forward (Triton)", frozenset({"torch", "triton"}), "interp"),
    Exercise("bench_attn", "Benchmarking attention", frozenset({"torch"}), "cpu"),
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
    _C("online_softmax.safe_matches_float64", "cpu", 2, "softmax_safe matches a float64 softmax",
       "Safe softmax: three passes, m = max(x), l = sum(exp(x - m)), out = exp(x - m) / l."),
    _C("online_softmax.online_max_sum", "cpu", 3, "online_max_sum returns the one-pass (m, l)",
       "Online softmax: m_new = max(m, x); l = l * exp(m - m_new) + exp(x - m_new); start at "
       "m = -inf, l = 0. Is m updated every step, and l rescaled when it moves?"),
    _C("online_softmax.online_matches_float64", "cpu", 2, "softmax_online matches a float64 softmax",
       "Online softmax: one pass for (m, l), then out = exp(x - m) / l."),
    _C("online_softmax.merge_chunks", "cpu", 4, "seven uneven chunks merged in any order give the one-pass (m, l)",
       "The merge rule: m = max(ma, mb); l = la * exp(ma - m) + lb * exp(mb - m). Both sums "
       "must be rescaled to the new max before adding."),
    _C("online_softmax.merge_empty_identity", "cpu", 1, "merging with the empty state (-inf, 0) changes nothing",
       "The empty state (m = -inf, l = 0) is the identity of merge: exp(-inf) = 0 makes the "
       "empty sum vanish; watch for -inf - (-inf) = nan when both sides are empty."),
    _C("online_softmax.no_overflow", "adversarial", 2, "[1000, 1001, 1002] gives no inf or nan",
       "Safe softmax: subtract the row max before exp, so no exponent is positive and "
       "nothing overflows (exp(1000) is inf even in float64)."),
    _C("online_softmax.edge_inputs", "adversarial", 2, "length 1 and float16 input",
       "A single element has softmax 1.0; float16 input overflows exp above 11.09, so "
       "subtract the max and accumulate in float32 or float64."),
    # ---------------------------------------------------------------- tiled_attention (16)
    _C("tiled_attention.naive_matches_float64", "cpu", 2, "naive_attention matches a float64 reference",
       "Attention: S = Q K^T / sqrt(d), P = safe softmax of each row of S, O = P V."),
    _C("tiled_attention.ragged_sizes", "cpu", 5, "tiled_attention on ragged sizes, Br != Bc, d = 64 and 128",
       "The block rule: per query block keep m, l, acc; for each key block s = q k^T * scale, "
       "m_new = max(m, rowmax(s)), p = exp(s - m_new), alpha = exp(m - m_new), l = l*alpha + "
       "rowsum(p), acc = acc*alpha + p v; at the end O = acc / l. Slices past N are shorter."),
    _C("tiled_attention.memory_is_tiled", "cpu", 4, "peak memory stays near Br*Bc + N*d, never N x N",
       "Tiling: never build anything bigger than a Br x Bc score tile; S and P exist only a "
       "tile at a time (that is the whole point of FlashAttention), and the only N-sized array "
       "is the output."),
    _C("tiled_attention.max_in_last_block", "adversarial", 3, "correct when the row max sits in the last key block",
       "Break It 2: right until the row max moves into a later key block. Is acc rescaled by "
       "alpha, as l is?"),
    _C("tiled_attention.large_scores", "adversarial", 2, "scores large enough to overflow exp without the running max",
       "The running max is what keeps exp from overflowing: p = exp(s - m_new), never exp(s)."),
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
    _C("bench_attn.backend_probe", "cpu", 3, "probe_backends reports each SDPA backend as working (with a time) or not",
       "Task 5: call sdpa under each sdpa_kernel(backend), catch RuntimeError, and record "
       "the time of those that run."),
    _C("bench_attn.sweep_rows", "cpu", 4, "run_sweep rows: schema, one row per N and impl, tflops from ms",
       "Each row: N, impl, ms, tflops = 4*B*H*N^2*D / ms / 1e9, peak_gb; one row per "
       "(N, impl), written to attn_bench.json."),
    _C("bench_attn.honest_timing", "adversarial", 4, "the proper timing is right and the two dishonest ones are not",
       "Break It 4: synchronise (kernels launch asynchronously), warm up (the first call "
       "compiles), repeat and take the median; no-sync timings measure only the launch."),
    _C("bench_attn.oom_recorded", "adversarial", 2, "an out-of-memory run is recorded as None and the sweep goes on",
       "Catch torch.OutOfMemoryError per run, record ms/tflops/peak_gb as None, free the "
       "memory and go on with the next impl and N."),
    _C("bench_attn.gpu_sweep", "gpu", 3, "the sweep on the GPU: naive memory grows ~4x per doubling, flash stays flat",
       "Naive attention writes S and P (N^2 each): its peak grows 4x per doubling of N; "
       "SDPA and yours keep only the output."),
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


def public_total() -> float:
    return sum(c.points for c in CHECKS)
