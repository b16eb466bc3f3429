"""flash_decode's kernel hooks, for the grader's tools that run its kernel outside a check's own
call.

Provenance's second replay (grader.judge.evidence.moved_inputs): flash_decode(q, k_cache, v_cache,
seq_lens) with q and the caches' values moved, the same seq_lens (a wrapper may read them to size
its grid). Each head's floor is what rounding its scores to the inputs' dtype can move o by
(reference.score_rounding_floor): a correct kernel may form q . k in float16, and where the moved
values make a near-tie at a max in the hundreds (flash_decode.large_scores) that is a percent of o.

Compute-sanitizer's target (grader.judge.evidence.sanitize.target_of): the call that memcheck
runs, and how its answer is checked here."""

from __future__ import annotations

import numpy as np

from grader.exercises.flash_decode.reference import decode_reference, score_rounding_floor
from grader.judge.answers.inputs import tensor
from grader.judge.evidence import sanitize
from grader.judge.evidence.moved_inputs import moved, tensors


def moved_inputs(fn, args, kwargs, rng):
    if fn != "flash_decode" or not tensors(args, 4):
        return None
    dtype = args[0].dtype
    return moved(args, kwargs, rng, 3,
                 lambda q, k, v, lens, *rest: [decode_reference(q, k, v, lens.astype(int))],
                 floor=lambda q, k, v, lens, *rest: [score_rounding_floor(q, k, v, lens, dtype)])


def _sanitizer_call(sub, device: str) -> None:
    """GQA (4 query heads per KV head), one ragged and one full sequence: the last sequence ends
    at L_max = 1000, not a multiple of any block, so an unmasked K or V load of the last KV head
    leaves the allocation (--padding makes that an error)."""
    import torch

    from grader.judge.answers.inputs import seeded, torch_randn

    lens = [333, 1000]
    shapes = [(2, 8, 64), (2, 2, 1000, 64), (2, 2, 1000, 64)]
    seeds = [int(x) for x in np.random.default_rng().integers(0, 2**31 - 1, size=3)]
    markers = [seeded(sh, "float16", device, s) for sh, s in zip(shapes, seeds)]
    got = sanitize.gated_call(sub, "flash_decode", "flash_decode", *markers,
                              tensor(np.array(lens, np.int32), "int32", device=device, poison=0.0))
    q, k, v = (torch_randn(sh, "float16", device, s).float() for sh, s in zip(shapes, seeds))
    want = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    for b, n in enumerate(lens):
        kk = k[b, :, :n].repeat_interleave(4, dim=0)            # query head h reads KV head h // 4
        vv = v[b, :, :n].repeat_interleave(4, dim=0)
        s = torch.einsum("hd,hnd->hn", q[b], kk) * 64 ** -0.5
        want[b] = torch.einsum("hn,hnd->hd", torch.softmax(s, dim=-1), vv)
    if not sanitize.close_enough(got, want):
        raise sanitize.wrong_answer("flash_decode", "flash_decode", TARGET)


TARGET = sanitize.Target("q (2, 8, 64), k_cache and v_cache (2, 2, 1000, 64) float16, "
                         "seq_lens [333, 1000]", _sanitizer_call)
