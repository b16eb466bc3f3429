"""flash_decode's mistakes, as edits to solutions/flash_decode.py: each loses the check aimed at
it, and that check's hint (the failure's own, else the registry's) names the idea."""

from tests.cases import Mutant

MUTANTS = [
    # NumPy: the splits added as they are, each still relative to its own max
    Mutant("merge_without_rescaling", "flash_decode",
           find="l = l_a * alpha + l_b * beta", replace="l = l_a + l_b",
           also=(("acc = acc_a * alpha[..., None] + acc_b * beta[..., None]",
                  "acc = acc_a + acc_b"),),
           checks=("flash_decode.merge_matches_one_pass",), idea="rescal"),
    # NumPy: two empty states give exp(-inf - (-inf)) = nan
    Mutant("merge_empty_nan", "flash_decode",
           find="shift = np.where(np.isneginf(m), 0.0, m)", replace="shift = m",
           checks=("flash_decode.merge_empty_split",), idea="identity"),
    # GQA: query head h reads KV head h % Hkv instead of h // GROUP
    Mutant("gqa_interleaved_heads", "flash_decode",
           find="heads = pid_kv * GROUP + offs_h", replace="heads = pid_kv + offs_h * tl.num_programs(1)",
           checks=("flash_decode.gqa_heads",), idea="h // (Hq // Hkv)"),
    # the merge kernel adds the splits without moving them onto the common max
    Mutant("kernel_merge_without_rescaling", "flash_decode",
           find="alpha = tl.exp(m_run - shift)", replace="alpha = 1.0",
           also=(("w = tl.exp(m - shift)  ", "w = tl.where(ok, 1.0, 0.0)  "),),
           checks=("flash_decode.max_in_last_split",), idea="rescal"),
    # every split runs its whole range: a split past seq_len computes exp(-inf - (-inf))
    Mutant("empty_split_runs", "flash_decode",
           find="hi = tl.minimum(lo + split_size, seq_len)", replace="hi = lo + split_size",
           checks=("flash_decode.empty_splits",), idea="empty state"),
    # the merge kernel without its guard: a sequence of length 0 merges only empty states
    # the merge kernel without its guards: a sequence of length 0 merges only empty states,
    # exp(-inf - (-inf)) and 0 / 0
    Mutant("kernel_merge_no_guard", "flash_decode",
           find='shift = tl.where(m_new == float("-inf"), 0.0, m_new)', replace="shift = m_new",
           also=(("o = tl.where(l_run > 0, acc_run / tl.where(l_run > 0, l_run, 1.0), 0.0)",
                  "o = acc_run / l_run"),),
           checks=("flash_decode.empty_splits",), idea="-inf - (-inf)"),
    # Break It 3 carried over: the K load without its mask (the -inf on the scores hides what it
    # read): the bounds hooks record the lanes past the end of the cache in ragged_lengths
    Mutant("k_load_unmasked", "flash_decode",
           find="                    mask=valid[None, :], other=0.0)\n        s = tl.dot(q, k)",
           replace="                    )\n        s = tl.dot(q, k)",
           checks=("flash_decode.ragged_lengths",), idea="mask"),
    # loads masked, but keys past seq_len still score (garbage or 0) instead of -inf
    Mutant("padded_scores_not_minus_inf", "flash_decode",
           find='        s = tl.where(valid[None, :], s, float("-inf"))                 # padded keys: weight 0\n',
           replace="", checks=("flash_decode.padded_keys_masked",), idea="-inf"),
    # Break It 1 carried over: plain sums of exp(s), no max anywhere (m stored as 0, so the merge
    # adds them as they are); right until exp(s) overflows float32 above 88.7
    Mutant("no_max_subtraction", "flash_decode",
           find="p = tl.exp(s - m_new[:, None])", replace="p = tl.exp(s)",
           also=(("alpha = tl.exp(m_i - m_new)", "alpha = tl.full([BLOCK_H], 1.0, tl.float32)"),
                 ("        m_i = m_new\n", "        m_i = m_new * 0.0\n")),
           checks=("flash_decode.large_scores",), idea="running max"),
    # the kernels still run, but the answer comes from PyTorch
    Mutant("wrapper_returns_torch", "flash_decode",
           find="    return o\n",
           replace="    return decode_reference(q, k_cache, v_cache, seq_lens).to(q.dtype)\n",
           checks=("flash_decode.uses_kernel",), idea="_decode_split"),
    # the 1/sqrt(D) scale left out of the scores
    Mutant("no_scale", "flash_decode",
           find="num_splits, split_size, 1.0 / math.sqrt(D),", replace="num_splits, split_size, 1.0,",
           checks=("flash_decode.matches_reference",), idea="1/sqrt(D)"),
    # the merge kernel rescales acc onto the common max, but adds the l of the splits as they are
    Mutant("merge_l_not_rescaled", "flash_decode",
           find="l_run = l_run * alpha + tl.sum(l * w, axis=0)", replace="l_run = l_run + tl.sum(l, axis=0)",
           checks=("flash_decode.max_in_last_split",), idea="adds the l_s as they are"),
    # ... or l, and not acc
    Mutant("merge_acc_not_rescaled", "flash_decode",
           find="acc_run = acc_run * alpha + tl.sum(acc * w[:, None], axis=0)",
           replace="acc_run = acc_run + tl.sum(acc, axis=0)",
           checks=("flash_decode.max_in_last_split",), idea="adds the acc_s as they are"),
    # a split with no keys stores nothing: the merge reads torch.empty's garbage
    Mutant("empty_split_stores_nothing", "flash_decode",
           find="    tl.store(MidM + row, m_i, mask=head_ok)\n    tl.store(MidL + row, l_i, mask=head_ok)\n"
                "    tl.store(MidAcc + row[:, None] * D + dims[None, :], acc, mask=head_ok[:, None])",
           replace="    if lo < hi:\n"
                   "        tl.store(MidM + row, m_i, mask=head_ok)\n"
                   "        tl.store(MidL + row, l_i, mask=head_ok)\n"
                   "        tl.store(MidAcc + row[:, None] * D + dims[None, :], acc, mask=head_ok[:, None])",
           checks=("flash_decode.empty_splits",), idea="empty state"),
    # a split size that is no multiple of BLOCK_N: each split's last block runs into the next
    # split (the loads are masked on seq_len only), so the keys there count twice
    Mutant("split_not_block_multiple", "flash_decode",
           find="split_size = triton.cdiv(triton.cdiv(max(L_max, 1), num_splits), BLOCK_N) * BLOCK_N",
           replace="split_size = triton.cdiv(max(L_max, 1), num_splits)",
           checks=("flash_decode.matches_reference",), idea="multiple of BLOCK_N"),
]
