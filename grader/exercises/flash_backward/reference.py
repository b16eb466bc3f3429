"""flash_backward's references and inputs, computed in the trusted process: float64 (o, L) and
analytic gradients, plain PyTorch attention in the inputs' precision (the baseline of the
gradient tolerance), the seeded (q, k, v) of the CPU layers, and the o and L that flash_bwd is
given on the GPU. The check modules, the hidden checks and the sanitizer target import these."""

from __future__ import annotations

import numpy as np

from grader.judge.answers import reference
from grader.judge.answers.inputs import randn, round_to, tensor

# float64 (o, L, m) and analytic (dq, dk, dv), shared with attention_backward's checks
forward_reference = reference.attention_lse
backward_reference = reference.attention_grads


def qkv(rng, shape, dtype="float16", scale=1.0):
    """Fresh (q, k, v) of `shape` (B, H, N, D), rounded to `dtype`, each scale * randn."""
    return tuple(randn(rng, shape, dtype, scale) for _ in range(3))


def torch_same_precision(q, k, v, do, dtype, causal=False):
    """(o, dq, dk, dv) of plain PyTorch attention in `dtype` (N x N intermediates), as float64
    arrays: the baseline of flash-attention's tolerance rule; do None: (o,) alone."""
    import torch

    dt = getattr(torch, dtype)
    leaves = [torch.from_numpy(np.asarray(t, np.float64)).to(dt).requires_grad_() for t in (q, k, v)]
    qq, kk, vv = leaves
    s = (qq @ kk.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    if causal:
        N = q.shape[-2]
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    o = torch.softmax(s, dim=-1) @ vv
    if do is None:
        return [o.detach().double().numpy()]
    # the gradient of sum(o * do) with respect to o is do, exactly (1 * do in `dtype`): the
    # same backward as o.backward(do), whose explicit gradient imports sympy (about 0.7 s of
    # this process's CPU in every grade) to check its shape
    (o * torch.from_numpy(np.asarray(do, np.float64)).to(dt)).sum().backward()
    return [t.detach().double().numpy() for t in (o, *(x.grad for x in leaves))]


def torch_float32_rounded(q, k, v, do, dtype, causal=False):
    """(dq, dk, dv) of plain PyTorch attention computed in float32 on the same inputs, each
    rounded to `dtype`: the baseline where PyTorch in `dtype` itself overflows."""
    return [round_to(g, dtype).astype(np.float64)
            for g in torch_same_precision(q, k, v, do, "float32", causal)[1:]]


# ------------------------------------------------------------------------------ on the GPU
# q, k, v and dO are drawn by torch's generator in the worker and again here
# (grader.judge.answers.gpu.seeded_inputs), so they need no transfer; the o and L that flash_bwd is given
# are computed here (float32, o rounded to the dtype) and sent.


def gpu_case(B, H, N, D, dtype, causal):
    """The case label of a GPU-sized call."""
    return f"{dtype} (B, H, N, D) = ({B}, {H}, {N}, {D}){', causal' if causal else ''}"


def given_o_lse(ref_o, ref_lse, dtype, guard):
    """o (rounded to `dtype`) and lse as arguments for flash_bwd, poisoned behind."""
    import torch

    o = ref_o.to(getattr(torch, dtype))
    o_arr = o.cpu().numpy() if dtype == "float16" else o.float().cpu().numpy()
    return (tensor(o_arr, dtype, device="cuda", guard=guard),
            tensor(ref_lse.cpu().numpy(), "float32", device="cuda", guard=guard)), o
