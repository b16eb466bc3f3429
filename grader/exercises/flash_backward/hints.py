"""flash_backward's hint texts: each is shown only when a check's evidence matches the mistake it
names (the diagnosis lives in judging.py and the check modules)."""

# --------------------------------------------------------------- the forward: L and the mask

LSE_NO_M_HINT = ("Your L equals log(l) without the max: L = m + log(l). l is a sum of exp(s - m), "
                 "so log(l) alone is the logsumexp shifted by -m.")
LSE_LOG2_HINT = ("Your L equals the logsumexp in log base 2 (L * log2(e)): if you compute with "
                 "exp2 and m in log2 units, convert back: L = (m2 + log2(l)) * ln(2).")
LSE_IS_M_HINT = ("Your L equals the running max m alone: L = m + log(l), the max plus the log of "
                 "the row sum l, so that the backward's P = exp(S - L) is the exact softmax.")
STRICT_HINT = ("Your output equals attention with key j visible only for j < i: the diagonal is "
               "visible too. The causal mask is j <= i (cols <= rows).")
DIAGONAL_HINT = ("Right with BLOCK_M = BLOCK_N = {equal} on the same inputs, wrong with BLOCK_M={bm}, "
                 "BLOCK_N={bn}: with BLOCK_M != BLOCK_N a key block can cross the diagonal without "
                 "starting on it. Mask every key block that reaches past the query block's first "
                 "row (start + BLOCK_N > pid_m * BLOCK_M), on cols <= rows, and stop the loop at "
                 "min((pid_m + 1) * BLOCK_M, N).")

# --------------------------------------------------------------- the backward's gradients

RECOMPUTE_HINT = ("dV = P^T dO is wrong, and dV needs nothing but P: recompute instead of "
                  "remember, P = exp(S - L) with S = scale * Q K^T and the L the forward saved (the "
                  "one passed in), masked like the forward; not exp(S - a running max).")
DELTA_HINT = ("Your dK and dQ equal the gradients with dS = P * dP: the D term is missing. The D "
              "trick: D = rowsum(dO * O), one number per query row, and dS = P * (dP - D).")
SCALE_HINT = ("Your {name} equals the right one times sqrt(D): S = scale * Q K^T, so the scale "
              "1/sqrt(D) multiplies {name} too ({name} = scale * {formula}).")
DQ_ONLY_HINT = ("Only dQ is wrong; dK and dV are right, on sizes where many programs run at "
                "once (the interpreter runs them one at a time, so a race cannot show there): if "
                "several programs add into the same rows of dQ, a tl.load + tl.store of each "
                "share races and loses updates. Add the shares with tl.atomic_add into a "
                "zero-initialised float32 dQ (cast at the end), or give each query block its own "
                "program that loops over the key blocks (one writer per row, no atomics).")
DS_PRECISION_HINT = (
    "Right with dO and V at ordinary scale (the control call: the same q, k, dO / 1000, V / 10), "
    "wrong here, where |dP| = |dO V^T| reaches {dp:.3g}, past float16's 65504, while dS = P * "
    "(dP - D) stays under {ds:.2g}: keep dP, dP - D and dS in float32 (tl.dot accumulates in "
    "float32) and cast only dS, the operand of tl.dot, to float16. Casting dP or dP - D to "
    "float16 first turns them into inf here.")

# --------------------------------------------------------------- masks

MASK_HINTS = {
    "tl.load": "Mask every load on the rows and keys that exist (rows < N, cols < N): a load "
               "without mask= reads past the end of q, k, v (or dO, L, D) in the last block, "
               "even when tl.where sets those scores to -inf afterwards.",
    "tl.store": "Mask every store on the rows that exist (rows < N; cols < N for dK and dV).",
}

# the answer of each known mistake of the backward (mistakes.grads): shown when the gradients
# equal it. {lo}, {hi}: the last key block's keys; {bm}, {bn}: the call's BLOCK_M, BLOCK_N
MISTAKE_HINTS = {
    "no_D": DELTA_HINT,
    "D_from_dO": ("Your dK and dQ equal the gradients with D = rowsum(dO * dO): the D trick is "
                  "D = rowsum(dO * O), the output O times the incoming gradient (one number per "
                  "query row, in _bwd_preprocess)."),
    "running_max": RECOMPUTE_HINT,
    "lse_is_m": ("Your gradients equal those of P = exp(S - m), m the row max, instead of "
                 "P = exp(S - L): the L given to the backward is m + log(l), and the backward "
                 "uses it as it is (if your forward stored m alone as lse, add log(l))."),
    "dK_unscaled": SCALE_HINT.format(name="dK", formula="dS^T Q"),
    "dQ_unscaled": SCALE_HINT.format(name="dQ", formula="dS K"),
    "dK_scaled_twice": ("Your dK equals the right one divided by sqrt(D): the scale is applied "
                        "twice in dK. S = scale * Q K^T carries it once: dK = scale * dS^T Q."),
    "dQ_scaled_twice": ("Your dQ equals the right one divided by sqrt(D): the scale is applied "
                        "twice in dQ. S = scale * Q K^T carries it once: dQ = scale * dS K."),
    "mask_strict": ("Your gradients equal those of a backward whose causal mask hides the "
                    "diagonal too (j < i): query i sees keys j <= i, cols <= rows, in both "
                    "backward kernels as in the forward."),
    "mask_missing": ("Your gradients equal those of attention without the causal mask: the "
                     "backward kernels must mask P where j > i (cols <= rows), as the forward "
                     "does."),
    "diagonal_unmasked": ("Your gradients equal those of a backward that skips the blocks above "
                          "the diagonal but masks nothing in the blocks that cross it "
                          "(BLOCK_M={bm}, BLOCK_N={bn}): P = 0 where cols > rows in every tile "
                          "that reaches past the diagonal."),
    "last_block_skipped": ("Your gradients equal those with the short last key block (keys "
                           "{lo}..{hi}, fewer than BLOCK_N={bn}) left out: launch cdiv(N, "
                           "BLOCK_N) key programs and loop to N, masking cols < N."),
}
