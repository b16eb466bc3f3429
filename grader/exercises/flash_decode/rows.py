"""flash_decode's rows of the registry: the exercise, and its public checks with points, layers and
hints (grader.registry gathers every exercise folder's rows)."""

from grader.schema import Band, Check as _C, Exercise, OVERFLOW

# ops a wrapper may run to size its launch (flash_decode: seq_lens.max().item() picks the split
# count); they compute no attention
SIZE_OPS = frozenset({"max", "amax", "min", "amin", "_local_scalar_dense", "clamp", "clamp_min",
                      "clamp_max"})

# both kernels (split and merge) may run; merge_partials is its NumPy part
EXERCISE = Exercise(
    "flash_decode", "Flash-Decoding (NumPy + Triton)", frozenset({"numpy", "torch", "triton"}),
    "interp", track="extension",
    kernels={"flash_decode": ("flash_decode(q, k_cache, v_cache, seq_lens)",
                              "_decode_split[grid](...) and _decode_merge[grid](...)",
                              "the attention and the merge")},
    extra_ops=SIZE_OPS, audit="mixed",
    seconds={"cpu": 2, "adversarial": 19, "interp": 29},   # its CPU layers in a grade on an H100 box (schedule.py)
    order=6,
    bands={"bandwidth": Band(0.6, 0.15, "GB/s of the cache read / the copy bandwidth measured in this run"),
           "split_speedup": Band(4.0, 1.0, "time with num_splits=1 / time with its own split count")})

CHECKS = [
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
       follows=("flash_decode.max_in_last_split",),
       evidence=OVERFLOW),
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
       "B = 1, L = 128K to 1M (1 ms of reading): num_splits=None at least 4x faster than num_splits=1",
       "Same trick, opposite axis: one sequence with few heads gives the GPU a handful of "
       "programs; splitting the keys gives it hundreds. Pick num_splits from the SM count."),
]
