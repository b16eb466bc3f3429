"""Registry rows of the instructor-only checks: grader.registry.hidden_checks() loads CHECKS
and marks each row hidden (Gradescope shows them after publication). Same fields as the public
rows in grader/registry.py; ids start with the exercise's name. Not part of the student release.
"""

from grader.registry import Check as _C

CHECKS = [
    # ---------------------------------------------------------------- online_softmax (3)
    _C("online_softmax.hidden_shapes", "cpu", 2,
       "other lengths, scales and dtypes, each shape twice with fresh values",
       "The public checks' ideas on lengths, scales and dtypes they do not use; the message "
       "names the case that differed (length, dtype, scale, which call).",
       follows=("online_softmax.safe_matches_float64", "online_softmax.online_max_sum",
                "online_softmax.online_matches_float64", "online_softmax.low_precision_input",
                "online_softmax.single_element", "online_softmax.no_overflow")),
    _C("online_softmax.inputs_untouched", "adversarial", 1, "x is unchanged after every call",
       "The inputs belong to the caller: work on copies or new arrays (x -= x.max() changes the "
       "caller's array). The message says which function changed x, where, and how.",
       follows=("online_softmax.safe_matches_float64", "online_softmax.online_max_sum",
                "online_softmax.online_matches_float64")),
    # ---------------------------------------------------------------- tiled_attention (4)
    _C("tiled_attention.hidden_shapes", "cpu", 3,
       "other N, d, Br and Bc (none a power of two), each shape twice with fresh values",
       "The block rule with any Br and Bc: slices past N are shorter, m, l and acc restart for "
       "every query block; the message names the case that differed.",
       follows=("tiled_attention.naive_matches_float64", "tiled_attention.tiled_matches_float64",
                "tiled_attention.ragged_sizes", "tiled_attention.max_in_last_block")),
    _C("tiled_attention.inputs_untouched", "adversarial", 1, "Q, K and V are unchanged after every call",
       "The inputs belong to the caller: work on copies or new arrays (scale the score tile, "
       "s *= scale, rather than Q in place). The message names the array that changed.",
       follows=("tiled_attention.naive_matches_float64", "tiled_attention.tiled_matches_float64",
                "tiled_attention.ragged_sizes", "tiled_attention.max_in_last_block")),
    # ---------------------------------------------------------------- softmax_triton (3)
    _C("softmax_triton.hidden_shapes", "interp", 2,
       "other shapes, each twice with fresh values, computed by the kernel",
       "One program per row, BLOCK = next power of two >= n_cols, masked load (other=-inf) and "
       "store; the wrapper only allocates and launches.",
       follows=("softmax_triton.uses_kernel", "softmax_triton.masked_accesses",
                "softmax_triton.all_negative_rows", "softmax_triton.matches_float64",
                "softmax_triton.float32_input", "softmax_triton.fp16_scaled_rows")),
    _C("softmax_triton.output_written", "adversarial", 1,
       "every output element is written by the kernel and the input is left alone",
       "The grid must cover every row (grid = (n_rows,)) and the store every column "
       "(mask = cols < n_cols); write only to the output, never to x.",
       follows=("softmax_triton.uses_kernel", "softmax_triton.masked_accesses",
                "softmax_triton.all_negative_rows", "softmax_triton.matches_float64",
                "softmax_triton.float32_input")),
    # ---------------------------------------------------------------- flash_triton (5)
    _C("flash_triton.hidden_shapes", "interp", 3,
       "other B, H, N, D and blocks, each shape twice with fresh values, computed by the kernel",
       "grid = (cdiv(N, BLOCK_M), B * H); mask loads on cols < N and rows < N, -inf for "
       "padded scores, rescale acc by alpha, divide by l_i at the end.",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands",
                "flash_triton.matches_reference", "flash_triton.max_in_last_block",
                "flash_triton.large_scores")),
    _C("flash_triton.output_written", "adversarial", 2,
       "every output element is written by the kernel; q, k, v and the memory behind them are left alone",
       "Every program stores its whole (BLOCK_M, D) tile, masked on rows < N only, into O; "
       "nothing is stored into Q, K or V.",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands",
                "flash_triton.padded_keys_masked", "flash_triton.matches_reference",
                "flash_triton.max_in_last_block", "flash_triton.large_scores",
                "flash_triton.ragged_n")),
    # ---------------------------------------------------------------- bench_attn (2)
    _C("bench_attn.hidden_timer_arguments", "adversarial", 2,
       "time_proper with its defaults, with rep = 1 and with an even rep",
       "Use the warmup and rep you are given (defaults 5 and 20), sync only through `sync` "
       "(default: torch.cuda.synchronize when CUDA is there, else nothing), median of the rep "
       "timed calls.",
       follows=("bench_attn.honest_timing",)),
]
del _C

# ------------------------------------------------- flash_decode (extension track, 4)
from grader.registry import Check as _C2  # noqa: E402

CHECKS += [
    _C2("flash_decode.hidden_shapes", "interp", 3,
        "other B, Hq/Hkv, L_max, D, lengths and split counts, each twice, computed by the kernels",
        "Same trick, opposite axis: one program per (split, KV head, sequence) with masks on "
        "cols < seq_len, the merge rule in a second kernel, every output row written, and "
        "nothing remembered from an earlier call.",
        follows=("flash_decode.matches_reference", "flash_decode.ragged_lengths",
                 "flash_decode.gqa_heads", "flash_decode.empty_splits",
                 "flash_decode.padded_keys_masked", "flash_decode.max_in_last_split",
                 "flash_decode.large_scores", "flash_decode.uses_kernel")),
    _C2("flash_decode.hidden_merge", "cpu", 1,
        "merge_partials of more, shuffled splits with empty ones, each shape twice",
        "The merge rule in any order, the empty state (-inf, 0, 0) as its identity, and o = acc "
        "/ l once at the end, computed from the parts you are given.",
        follows=("flash_decode.merge_matches_one_pass", "flash_decode.merge_empty_split")),
]
del _C2

# ------------------------------------------- attention_backward (extension track, 3)
from grader.registry import Check as _C3  # noqa: E402

_AB = ("attention_backward.forward_matches_float64", "attention_backward.lse_includes_m",
       "attention_backward.causal_mask", "attention_backward.max_in_last_block",
       "attention_backward.backward_matches_float64", "attention_backward.backward_causal",
       "attention_backward.backward_recomputes_from_L")
CHECKS += [
    _C3("attention_backward.hidden_shapes", "cpu", 2,
        "other N, d, Br, Bc (Br = 1, blocks larger than N), causal and not, each twice",
        "The forward's block rule with L = m + log(l) and causal skipping, and the backward's "
        "P = e^(S - L) with the D trick, on every shape; nothing remembered between calls.",
        follows=_AB),
    _C3("attention_backward.inputs_untouched", "adversarial", 1,
        "Q, K, V, O, L and dO are unchanged after the calls",
        "The inputs belong to the caller: work on new arrays (O -= ... or L += ... changes the "
        "caller's). The message says which input changed, where, and how.",
        follows=_AB),
]
del _C3, _AB

# ------------------------------------------- flash_backward (extension track, 3)
from grader.registry import Check as _C4  # noqa: E402

CHECKS += [
    _C4("flash_backward.hidden_shapes", "interp", 3,
        "other N (1 included), blocks larger than N, fp16 and fp32, causal and not, each twice; "
        "inputs unchanged",
        "L = m + log(l) and skipping blocks above the diagonal in the forward; recompute instead "
        "of remember, P = e^(S - L), and the D trick in the backward; on every shape, masked, "
        "computed by your kernels, nothing remembered between calls, the inputs left as they came.",
        follows=("flash_backward.forward_matches_float64", "flash_backward.lse_includes_m",
                 "flash_backward.causal_mask", "flash_backward.backward_matches_float64",
                 "flash_backward.backward_causal", "flash_backward.masked_accesses",
                 "flash_backward.uses_kernel")),
]
del _C4
