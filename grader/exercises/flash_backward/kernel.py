"""flash_backward's compute-sanitizer target (grader.judge.evidence.sanitize.target_of): causal
flash_fwd and flash_bwd at N = 1000, run under compute-sanitizer by the gpu layer's
flash_backward.sanitizer check."""

from __future__ import annotations

import numpy as np

from grader.judge.answers.inputs import tensor
from grader.judge.evidence import sanitize


def _call(sub, device: str) -> None:
    """Causal flash_fwd and flash_bwd at N = 1000 (no block size divides it), seeded inputs the
    worker draws itself, the answers checked here (loosely: the values are other checks' job)."""
    from grader.judge.answers import gpu as g
    from grader.judge.answers.inputs import seeded, torch_randn

    shape = (1, 2, 1000, 64)
    seeds = [int(x) for x in np.random.default_rng().integers(0, 2**31 - 1, size=4)]
    markers = [seeded(shape, "float16", device, s) for s in seeds]
    q, k, v, do = (torch_randn(shape, "float16", device, s) for s in seeds)
    got = sanitize.gated_call(sub, "flash_backward", "flash_fwd", *markers[:3], causal=True)
    ref_o, ref_lse = g.attention_lse_reference(q, k, v, causal=True)
    if not (isinstance(got, (tuple, list)) and len(got) == 2 and sanitize.close_enough(got[0], ref_o)
            and sanitize.close_enough(got[1], ref_lse)):
        raise sanitize.wrong_answer("flash_backward", "flash_fwd", TARGET)
    o = ref_o.half()
    got = sanitize.gated_call(sub, "flash_backward", "flash_bwd", *markers[:3],
                              tensor(o.cpu().numpy(), "float16", device=device),
                              tensor(ref_lse.cpu().numpy(), "float32", device=device), markers[3],
                              causal=True)
    ref = g.attention_grads_reference(q, k, v, do, True, dtype="float32")
    if not (isinstance(got, (tuple, list)) and len(got) == 3 and all(
            sanitize.close_enough(x, r, tol=5e-2) for x, r in zip(got, ref))):
        raise sanitize.wrong_answer("flash_backward", "flash_bwd", TARGET)


TARGET = sanitize.Target("causal, q, k, v, do of shape (1, 2, 1000, 64) float16", _call)
