"""flash_decode's gpu checks: real sizes on CUDA, and compute-sanitizer.

The caches are drawn by torch's generator in the worker and again here
(grader.judge.answers.gpu.seeded_inputs); the reference (reference.gpu_decode_reference) is computed here
on the GPU in float32, and the output may be off it by a multiple of what PyTorch in the
inputs' dtype gets there (reference.decode_same_precision; compare.assert_close). The call compute-sanitizer watches is this folder's kernel.py (TARGET).
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.exercises.flash_decode.reference import (CACHE_GUARD_ROWS, decode_same_precision,
                                                     gpu_decode_reference)
from grader.judge.answers.inputs import tensor
from grader.judge.evidence import sanitize
from grader.judge.answers.compare import assert_close

# (B, Hq, Hkv, L_max, D, dtype): B from 1 to 16, MHA, GQA and MQA, ragged L_max, D 64 and 128
GPU_CASES = ((1, 32, 8, 32768, 128, "float16"), (16, 32, 8, 4097, 128, "bfloat16"),
             (4, 16, 16, 8191, 64, "float16"), (8, 32, 4, 2000, 128, "bfloat16"),
             (2, 8, 1, 777, 64, "float16"), (3, 4, 2, 1, 128, "float16"))


def _gpu_lens(rng, B, L):
    lens = rng.integers(1, L + 1, size=B)
    lens[0] = L
    if B > 2:
        lens[-1] = 1
    return lens.astype(np.int32)


@pytest.mark.check("flash_decode.gpu_real_sizes")
def test_gpu_real_sizes(student, rng, gpu):
    import torch

    from grader.judge.answers import gpu as g

    sub = student()
    for B, Hq, Hkv, L, D, dtype in GPU_CASES:
        lens = _gpu_lens(rng, B, L)
        case = f"{dtype} B={B}, Hq={Hq}, Hkv={Hkv}, L_max={L}, D={D}, seq_lens={lens.tolist()[:6]}"
        (mq,), (q,) = g.seeded_inputs(rng, (B, Hq, D), dtype, count=1)
        mkv, (k, v) = g.seeded_inputs(rng, (B, Hkv, L, D), dtype, count=2,
                                      guard=CACHE_GUARD_ROWS * D)
        r = sub.call("flash_decode", mq, *mkv, tensor(lens, "int32", device="cuda", poison=0.0),
                     opts={"poison_empty": True, "sync": True, "trace": True})
        lens_t = torch.from_numpy(lens)
        # flash-attention's rule: within a multiple of PyTorch's own error in `dtype`, here
        assert_close(r.value, gpu_decode_reference(q, k, v, lens_t),
                     what="flash_decode(q, k_cache, v_cache, seq_lens)", dtype=dtype,
                     baseline=decode_same_precision(q, k, v, lens_t), case=case, seed=rng.seed)
        del q, k, v


@pytest.mark.check("flash_decode.sanitizer")
def test_sanitizer(student, gpu):
    if sanitize.sanitizer_path() is None:
        pytest.skip("compute-sanitizer is not installed on this machine (it comes with the CUDA toolkit)")
    sanitize.memcheck(student().directory, "flash_decode")
