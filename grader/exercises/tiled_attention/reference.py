"""tiled_attention's inputs: what its cpu and adversarial checks and its hidden checks
(hidden_tests/tiled_attention/) draw. The float64 reference they are compared with is
grader.judge.answers.reference.attention."""

from __future__ import annotations

import numpy as np

from grader.judge.answers.inputs import randn

DTYPES = ("float32", "float64")


def qkv(rng, N: int, d: int, dtype: str, scale: float = 1.0):
    """Fresh (Q, K, V), each (N, d), standard normal * scale, exact in dtype."""
    return tuple(randn(rng, (N, d), dtype, scale) for _ in range(3))


def max_in_first_key(rng, N: int, d: int, dtype: str, boost: float = 4.0):
    """(Q, K, V) whose every row's largest score is the one against key 0, by `boost` or more.

    Q and K have entries in {-1, 0, 1} (scores spread ~0.66 around 0); key 0 is boost * sqrt(d)
    along dimension 0, where every query has 1, and 0 elsewhere, so its score is `boost` in every
    row. The running max then never moves after the first key block: alpha = 1 from there on.
    Key 0 still holds only a few percent of each row's weight, so every key counts."""
    for _ in range(20):
        Q, K = (rng.integers(-1, 2, (N, d)).astype(np.float64) for _ in range(2))
        Q[:, 0], K[:, 0] = 1.0, 0.0
        K[0] = 0.0
        K[0, 0] = boost * np.sqrt(d)
        Q, K, V = Q.astype(dtype), K.astype(dtype), randn(rng, (N, d), dtype)
        s = (Q.astype(np.float64) @ K.T.astype(np.float64))
        if N == 1 or (s[:, 0:1] > s[:, 1:]).all():
            return Q, K, V
    raise RuntimeError("could not draw inputs with every row's max at key 0")

