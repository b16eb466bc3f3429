"""Hidden checks for flash_decode: other shapes, lengths and split counts than the public
checks, each twice with fresh values. The Triton calls are traced (kernels launched, nothing
computed by PyTorch around them beyond choosing a split count), new tensors are poisoned (an
output element the merge never writes stays NaN), and q, the caches, seq_lens and the NaN behind
them are read back afterwards. Shapes stay small: the interpreter runs one program at a time."""

from __future__ import annotations

import numpy as np
import pytest

from grader.exercises.flash_decode.reference import (CACHE_GUARD_ROWS, attention_rows,
                                                     decode_reference, decode_same_precision,
                                                     state_of)
from grader.judge.answers.compare import assert_close
from grader.judge.answers.inputs import chunks, randn, tensor
from hidden_tests.common import assert_guards_untouched, assert_untouched, assert_written

# B, Hq, Hkv, L_max, D, num_splits (None: the submission's own choice)
CASES = [(3, 6, 2, 61, 64, 5), (2, 4, 4, 45, 128, None), (5, 3, 1, 23, 64, 7)]


@pytest.mark.check("flash_decode.hidden_shapes")
def test_hidden_shapes(student, rng):
    sub = student()
    for B, Hq, Hkv, L, D, splits in CASES:
        for call in (1, 2):
            q = randn(rng, (B, Hq, D), "float16")
            k, v = (randn(rng, (B, Hkv, L, D), "float16") for _ in range(2))
            lens = rng.integers(0, L + 1, size=B).astype(np.int32)
            lens[0] = L
            if call == 1:      # an empty row (every split empty) in every draw, not in some
                lens[-1] = 0
            args = [tensor(q, "float16", guard=D),
                    *(tensor(t, "float16", guard=CACHE_GUARD_ROWS * D) for t in (k, v)),
                    tensor(lens, "int32", poison=0.0)]
            what = (f"flash_decode(q, k_cache, v_cache, seq_lens, num_splits={splits}) (B={B}, "
                    f"Hq={Hq}, Hkv={Hkv}, L_max={L}, D={D}, seq_lens={lens.tolist()}, float16, "
                    f"call {call} of 2 with this shape)")
            r = sub.call("flash_decode", *args, **({} if splits is None else {"num_splits": splits}),
                         opts={"trace": True, "poison_empty": True, "return_args": True})
            names = ["q", "k_cache", "v_cache", "seq_lens"]
            assert_untouched([q, k, v, lens], r.extras.get("args_after", []), names, what, rng.seed)
            assert_guards_untouched(r.extras.get("guards_after", [])[:3], names[:3], what, rng.seed)
            expected = decode_reference(q, k, v, lens)
            assert_written(r.value, expected, what, rng.seed)
            assert_close(r.value, expected, what=what, dtype="float16", seed=rng.seed,
                         baseline=decode_same_precision(q, k, v, lens, "float16"))


@pytest.mark.check("flash_decode.hidden_merge")
def test_hidden_merge(student, rng):
    sub = student()
    for rows, n, D, parts_count in ((5, 301, 128, 13), (1, 40, 16, 9)):
        for call in (1, 2):
            s = randn(rng, (rows, n), "float64", 30)
            v = randn(rng, (n, D), "float64")
            parts = [state_of(s[:, c], v[c]) for c in chunks(rng, n, parts_count)]
            empty = (np.full(rows, -np.inf), np.zeros(rows), np.zeros((rows, D)))
            parts = [parts[i] for i in rng.permutation(len(parts))] + [empty]
            # the first call's merge begins with an empty split (its max -inf) in every draw
            parts.insert(0 if call == 1 else int(rng.integers(0, len(parts))), empty)
            assert_close(sub.merge_partials(parts), attention_rows(s, v),
                         what=f"merge_partials of {len(parts)} splits, two of them empty, shuffled"
                              f"{', one empty first' if call == 1 else ''} "
                              f"(rows={rows}, D={D}, call {call} of 2)",
                         dtype="float64", seed=rng.seed)
