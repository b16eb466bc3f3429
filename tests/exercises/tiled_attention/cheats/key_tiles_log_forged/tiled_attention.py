"""Cheat (issue 53, "read logs are built in the student's process"): tiled_attention one whole
query row at a time against every key (K @ q: no Bc tiles of the keys, O(N) memory), then,
through gc (reached through sys.modules: the import allow-list refuses `import gc`), the read
logs of the grader's recording K and V (grader.worker.row_recorder's _RowLog objects) rewritten to
say no read covered more than 16 rows. The outside memory count cannot tell a row of N scores
from a few tiles, and the log was always the worker's to rewrite: key_tiles is advice with no
points, so the rewrite buys nothing; the answers and the memory earn what they earn."""
import sys

import numpy as np


def naive_attention(Q, K, V):
    raise NotImplementedError("not part of this cheat")


def _tiles_on_record():
    for o in sys.modules["gc"].get_objects():
        if type(o).__name__ == "_RowLog" and hasattr(o, "widest"):
            o.widest = min(o.widest, 16)


def tiled_attention(Q, K, V, Br=64, Bc=64):
    N, d = Q.shape
    scale = Q.dtype.type(1.0 / np.sqrt(d))
    O = np.empty_like(Q)
    s = np.empty(N, dtype=Q.dtype)                         # one row of N scores, reused
    for i in range(N):
        np.matmul(K, Q[i], out=s)                          # every key at once: no Bc tiles
        s *= scale
        s -= s.max()
        np.exp(s, out=s)
        np.matmul(s, V, out=O[i])
        O[i] /= s.sum()
    _tiles_on_record()
    return O
