"""How flash_triton's interpreter checks call flash_fwd and judge its answer, shared by its
adversarial and interp check modules.

Every call goes through the kernel-use gate (grader.fixtures.ProvingSubmission): a Triton launch and no
computing torch op. Every tl.load/tl.store is checked lane by lane against the tensors of the
call (grader/worker/bounds.py): a lane past the end of q, k, v or the output is switched off
(a load gets `other`, a store writes nothing) and recorded; only `guard_bands` judges those
records, so a load without mask= fails there, deterministically, even when a later tl.where
hides what it read, and nowhere else.
"""

from __future__ import annotations

from grader.exercises.tiled_attention.mistakes import attention_hint
from grader.judge.answers import reference
from grader.judge.answers.compare import CheckFailed, assert_close
from grader.judge.answers.inputs import tensor


def describe(q, dtype, BLOCK_M, BLOCK_N, case):
    """The case line of a message: shape, blocks, dtype and what the case is about."""
    B, H, N, D = q.shape
    return ", ".join(x for x in (f"B={B}, H={H}, N={N}, D={D}, BLOCK_M={BLOCK_M}, "
                                 f"BLOCK_N={BLOCK_N}, {dtype}", case) if x)


def flash_call(sub, q, k, v, *, dtype="float16", BLOCK_M=64, BLOCK_N=64):
    """flash_fwd through the gate, NaN behind every input, new tensors NaN-filled."""
    D = q.shape[-1]
    guard = max(BLOCK_M, BLOCK_N) * D
    args = [tensor(t, dtype, guard=guard) for t in (q, k, v)]
    return sub.call("flash_fwd", *args, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                    opts={"poison_empty": True})


def _flash(sub, q, k, v, *, dtype="float16", BLOCK_M=64, BLOCK_N=64, case="", seed=None,
           explain=None):
    """Run flash_fwd on (q, k, v) and check the whole output against float64. A failure's hint
    comes from its evidence: `explain(out, expected)` (this case's own reading), else the known
    mistake whose answer the output equals (tiled_attention/mistakes.py: the same loop over key
    blocks), else none."""
    out = flash_call(sub, q, k, v, dtype=dtype, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N).value
    expected = reference.attention(q, k, v)
    try:
        assert_close(out, expected, what="flash_fwd(q, k, v)", dtype=dtype,
                     case=describe(q, dtype, BLOCK_M, BLOCK_N, case), seed=seed,
                     grid=(BLOCK_M, None))   # a picture of a failure: one band per program
    except CheckFailed as e:
        hint = (explain(out, expected) if explain else "") or attention_hint(
            out, q, k, v, block_n=BLOCK_N, dtype=dtype)
        raise CheckFailed(str(e), hint=hint or e.hint) from None


def flash_case(sub, q, k, v, seed, dtype="float16", case="", explain=None, **blocks):
    """One case for grader.judge.answers.cases.run_cases: (its label, a call that runs flash_fwd on
    (q, k, v) and checks the whole output against float64)."""
    label = f"{describe(q, dtype, blocks.get('BLOCK_M', 64), blocks.get('BLOCK_N', 64), case)} [seed {seed}]"
    return label, lambda: _flash(sub, q, k, v, dtype=dtype, case=case, seed=seed,
                                 explain=explain, **blocks)
