from tests.cases import Mutant

_SUM = "        l_i = l_i * tl.exp(m_i - m_safe) + tl.sum(tl.exp(x - m_safe), axis=0)\n"
_PASS1_MASK = ("        mask = start + cols < n_cols\n"
               "        x = tl.load(in_row + start + cols, mask=mask, other=float(\"-inf\"),\n"
               "                    eviction_policy=\"evict_last\").to(tl.float32)\n"
               "        m_new")

# the lesson's mistakes in this exercise; the short path's twins of softmax_triton's (padding read
# as 0, exp without the max, torch.softmax in the wrapper) are softmax_triton's mutants
MUTANTS = [
    # the lesson's online softmax without the rescale: l adds each block's sum measured against
    # the new max, while the terms already in it were measured against the old one
    Mutant("no_rescale", "softmax_long",
           find=_SUM, replace="        l_i = l_i + tl.sum(tl.exp(x - m_safe), axis=0)\n",
           checks=("softmax_long.max_in_last_block",), idea="rescal"),
    # Break It 1 on the long path: exp(x) in both passes, no max taken off (the short path's
    # twin is softmax_triton's no_max_subtraction)
    Mutant("no_max_subtraction_long", "softmax_long",
           find=_SUM, replace="        l_i = l_i + tl.sum(tl.exp(x), axis=0)\n",
           also=(("        y = tl.exp(x - m_i) * inv_l\n", "        y = tl.exp(x) * inv_l\n"),),
           checks=("softmax_long.fp16_large_values",), idea="max"),
    # exp(x - m_new) with m_new = -inf after a block of only -inf: -inf - (-inf) = nan
    Mutant("neg_inf_minus_neg_inf", "softmax_long",
           find='        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)\n',
           replace="        m_safe = m_new\n",
           checks=("softmax_long.neg_inf_blocks",), idea="-inf"),
    # each block's exponentials summed in float16 (as p is cast before a dot in attention)
    Mutant("fp16_block_sums", "softmax_long",
           find=_SUM, replace="        l_i = l_i * tl.exp(m_i - m_safe) + "
                              "tl.sum(tl.exp(x - m_safe).to(tl.float16), axis=0)\n",
           checks=("softmax_long.float32_rows",), idea="float16"),
    # the last block's mask off by one: the lane at n_cols is read (pass 1), one past the row
    Mutant("last_block_mask_off_by_one", "softmax_long",
           find=_PASS1_MASK, replace=_PASS1_MASK.replace("start + cols < n_cols", "start + cols <= n_cols"),
           checks=("softmax_long.masked_accesses",), idea="mask"),
    # several rows per program without rows < n_rows: the last tile reads and writes past x
    Mutant("short_rows_without_row_mask", "softmax_long",
           find="    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)",
           replace="    mask = (cols[None, :] < n_cols) & (rows[:, None] >= 0)",
           checks=("softmax_long.masked_accesses",), idea="n_rows"),
    # the running max starts at 0: rows far below 0 underflow, 0 / 0
    Mutant("max_starts_at_zero", "softmax_long",
           find='    m_i = float("-inf")\n', replace="    m_i = 0.0\n",
           checks=("softmax_long.all_negative_rows",), idea="-inf"),
]
