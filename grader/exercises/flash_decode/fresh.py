"""flash_decode(q, k_cache, v_cache, seq_lens) for provenance's second replay
(grader.judge.evidence.fresh): q and the caches with their values moved, the same seq_lens (a wrapper
may read them to size its grid). Each head's floor is what rounding its scores to the inputs'
dtype can move o by (reference.score_rounding_floor): a correct kernel may form q . k in
float16, and where the moved values make a near-tie at a max in the hundreds
(flash_decode.large_scores) that is a percent of o."""

from __future__ import annotations

from grader.exercises.flash_decode.reference import decode_reference, score_rounding_floor
from grader.judge.evidence.fresh import moved, tensors


def fresh(fn, args, kwargs, rng):
    if fn != "flash_decode" or not tensors(args, 4):
        return None
    dtype = args[0].dtype
    return moved(args, kwargs, rng, 3,
                 lambda q, k, v, lens, *rest: [decode_reference(q, k, v, lens.astype(int))],
                 floor=lambda q, k, v, lens, *rest: [score_rounding_floor(q, k, v, lens, dtype)])
