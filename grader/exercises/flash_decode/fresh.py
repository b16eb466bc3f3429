"""flash_decode(q, k_cache, v_cache, seq_lens)'s moved inputs for provenance's second replay
(grader.judge.fresh): q and the caches with their values moved (same shapes), the same seq_lens
(a wrapper may read them to size its grid), and the float64 decode of both."""

from __future__ import annotations

from grader.exercises.flash_decode.reference import decode_reference
from grader.judge.fresh import Fresh, redrawn, tensors, values


def fresh(fn, args, kwargs, rng):
    if fn != "flash_decode" or not tensors(args, 4):
        return None
    q, k, v = (redrawn(a, rng) for a in args[:3])
    lens = values(args[3]).astype(int)
    return Fresh([q, k, v, *args[3:]], kwargs,
                 [decode_reference(values(q), values(k), values(v), lens)],
                 [decode_reference(*(values(a) for a in args[:3]), lens)])
