from tests.cases import Mutant

K_MASK = ",\n                    mask=cols[None, :] < N, other=0.0)"
V_MASK = ",\n                    mask=cols[:, None] < N, other=0.0)"
WHERE = '        s = tl.where(cols[None, :] < N, s, float("-inf"))\n'
STORE_MASK = ", mask=rows[:, None] < N)"

MUTANTS = [
    # Break It 2: acc keeps its old scale when the max moves
    Mutant("acc_not_rescaled", "flash_triton",
           find="acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)",
           replace="acc = acc + tl.dot(p.to(v.dtype), v)",
           checks=("flash_triton.max_in_last_block",), idea="alpha"),
    # Break It 3, first half: K and V tiles read past the end of the tensor
    Mutant("kv_loads_unmasked", "flash_triton", find=K_MASK, replace=")",
           checks=("flash_triton.guard_bands",), idea="mask", also=((V_MASK, ")"),)),
    Mutant("v_load_unmasked", "flash_triton", find=V_MASK, replace=")",
           checks=("flash_triton.guard_bands",), idea="mask"),
    # the K tile without mask=: the tl.where turns what it read into -inf, so the values are
    # right; the read past the end of k is caught lane by lane all the same
    Mutant("k_load_unmasked_then_where", "flash_triton", find=K_MASK, replace=")",
           checks=("flash_triton.guard_bands",), idea="mask"),
    # the last query block writes past the end of the output
    Mutant("o_store_unmasked", "flash_triton", find=STORE_MASK, replace=")",
           checks=("flash_triton.guard_bands",), idea="store"),
    # Break It 3, second half: masked loads, but padded keys still score 0
    Mutant("padded_scores_not_minus_inf", "flash_triton", find=WHERE, replace="",
           checks=("flash_triton.padded_keys_masked",), idea="-inf"),
    Mutant("no_scale", "flash_triton",
           find="s = tl.dot(q, k) * scale", replace="s = tl.dot(q, k)",
           checks=("flash_triton.matches_reference",), idea="sqrt"),
    Mutant("no_final_division", "flash_triton",
           find="acc = acc / l_i[:, None]", replace="acc = acc",
           checks=("flash_triton.matches_reference",), idea="l_i"),
    # Break It 1 carried over: exp(s) overflows float32 above 88.7
    Mutant("no_max_subtraction", "flash_triton",
           find="p = tl.exp(s - m_new[:, None])", replace="p = tl.exp(s)",
           checks=("flash_triton.large_scores",), idea="running max"),
    # the running max starts at 0: right while some score is positive, 0 / 0 once every score
    # of a row is strongly negative
    Mutant("running_max_starts_at_zero", "flash_triton",
           find='m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)',
           replace="m_i = tl.zeros([BLOCK_M], tl.float32)",
           checks=("flash_triton.large_scores",), idea="-inf"),
    # m_i stays -inf: alpha = 0 at every block, so only the last key block counts
    Mutant("running_max_never_updated", "flash_triton",
           find="        m_i = m_new\n", replace="",
           checks=("flash_triton.matches_reference",), idea="m_new"),
    # the kernel assumes N is a multiple of the blocks: no masks, no -inf
    Mutant("assumes_full_blocks", "flash_triton", find=K_MASK, replace=")",
           also=((V_MASK, ")"), (WHERE, ""), (STORE_MASK, ")"),
                 (",\n                mask=rows[:, None] < N, other=0.0)", ")")),
           checks=("flash_triton.guard_bands",), idea="mask"),
    # a kernel that only handles 16-bit input
    Mutant("asserts_16_bit_input", "flash_triton",
           find="    B, H, N, D = q.shape\n",
           replace="    B, H, N, D = q.shape\n"
                   "    assert q.dtype in (torch.float16, torch.bfloat16), 'fp16/bf16 only'\n",
           checks=("flash_triton.float32_input",), idea="float32"),
    # the kernel still runs, but the answer comes from PyTorch
    Mutant("wrapper_returns_sdpa", "flash_triton",
           find="    return o.reshape(B, H, N, D)\n",
           replace="    return torch.nn.functional.scaled_dot_product_attention(q, k, v)"
                   ".reshape(B, H, N, D)\n",
           checks=("flash_triton.uses_kernel",), idea="_flash_fwd"),
    # no kernel at all: softmax(q k^T / sqrt(D)) v in PyTorch
    Mutant("wrapper_eager_no_launch", "flash_triton",
           find="    o = torch.empty_like(q)\n",
           replace="    return attention_eager(q, k, v).reshape(B, H, N, D)\n",
           checks=("flash_triton.uses_kernel",), idea="_flash_fwd"),
]
