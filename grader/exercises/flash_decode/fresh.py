"""flash_decode(q, k_cache, v_cache, seq_lens) for provenance's second replay
(grader.judge.fresh): q and the caches with their values moved, the same seq_lens (a wrapper
may read them to size its grid)."""

from __future__ import annotations

from grader.exercises.flash_decode.reference import decode_reference
from grader.judge.fresh import moved, tensors


def fresh(fn, args, kwargs, rng):
    if fn != "flash_decode" or not tensors(args, 4):
        return None
    return moved(args, kwargs, rng, 3, lambda q, k, v, lens, *rest:
                 [decode_reference(q, k, v, lens.astype(int))])
