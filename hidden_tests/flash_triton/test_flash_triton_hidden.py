"""Hidden checks for flash_triton: other (B, H, N, D) and block sizes, each twice with fresh
values, every call traced (a Triton launch, nothing computed by PyTorch around it), with new
tensors poisoned (an output element the kernel never writes stays NaN) and q, k, v and the NaN
behind them read back afterwards. Shapes stay small: the interpreter runs one program at a time."""

from __future__ import annotations

import pytest

from grader.exercises.flash_triton.reference import shifted_qkv
from grader.judge.answers import reference
from grader.judge.answers.cases import run_cases
from grader.judge.answers.compare import assert_close
from grader.judge.answers.inputs import randn, tensor
from hidden_tests.common import assert_written, kernel_call

# (B, H, N, D), blocks: N a multiple of both blocks (ragged N is ragged_n's and
# output_written's business), so a kernel that assumes full blocks loses only those
CASES = [((1, 1, 96, 32), dict(BLOCK_M=32, BLOCK_N=32)),
         ((2, 1, 64, 16), dict(BLOCK_M=16, BLOCK_N=32)),
         ((1, 3, 32, 64), dict(BLOCK_M=16, BLOCK_N=16))]


def _flash(sub, q, k, v, blocks, case, seed):
    """flash_fwd through kernel_call, NaN behind each input; returns (value, what)."""
    B, H, N, D = q.shape
    what = (f"flash_fwd(q, k, v) (B={B}, H={H}, N={N}, D={D}, BLOCK_M={blocks['BLOCK_M']}, "
            f"BLOCK_N={blocks['BLOCK_N']}, float16, {case})")
    guard = max(blocks.values()) * D
    args = [tensor(t, "float16", guard=guard) for t in (q, k, v)]
    return kernel_call(sub, "flash_fwd", args, {"q": q, "k": k, "v": v}, what, seed,
                       **blocks), what


@pytest.mark.check("flash_triton.hidden_shapes")
def test_hidden_shapes(student, rng, credit):
    sub = student()
    cases = []
    for shape, blocks in CASES:
        for call in (1, 2):
            q, k, v = (randn(rng, shape, "float16") for _ in range(3))

            def run(q=q, k=k, v=v, blocks=blocks, call=call):
                r, what = _flash(sub, q, k, v, blocks, f"call {call} of 2 with this shape", rng.seed)
                assert_close(r.value, reference.attention(q, k, v), what=what, dtype="float16",
                             seed=rng.seed)
            cases.append((f"{shape} {blocks} call {call} [seed {rng.seed}]", run))
    run_cases(credit, cases)


@pytest.mark.check("flash_triton.output_written")
def test_output_written(student, rng):
    sub = student()
    # three query blocks, the last one partial (rows 128..149 of 150), over two heads
    # every score shifted by 16: the padded keys' -inf is padded_keys_masked's business
    q, k, v = shifted_qkv(rng, (1, 2, 150, 16))
    r, what = _flash(sub, q, k, v, dict(BLOCK_M=64, BLOCK_N=64), "new tensors filled with NaN",
                     rng.seed)
    expected = reference.attention(q, k, v)
    assert_written(r.value, expected, what, rng.seed, r.extras)
    assert_close(r.value, expected, what=what, dtype="float16", seed=rng.seed)
