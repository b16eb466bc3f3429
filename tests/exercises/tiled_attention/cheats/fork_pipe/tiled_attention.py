"""Cheat (issue 18, "a forked child does the work"): a child process computes naive N x N
attention and writes the output back through a pipe, so the worker process itself never holds
the scores. Ignores Br and Bc. The seccomp filter denies the fork in CPU modes; where it is not
installed, the worker's memory cgroup counts the child's memory as the worker's."""
import os

import numpy as np


def naive_attention(Q, K, V):
    raise NotImplementedError("not part of this cheat")


_o = os   # an alias: the static audit resolves only names bound by import (issue 18)


def tiled_attention(Q, K, V, Br=64, Bc=64):
    O = np.empty_like(Q)
    r, w = _o.pipe()
    pid = _o.fork()
    if pid == 0:                                           # the child: the N x N scores live here
        S = Q @ K.T / np.sqrt(Q.shape[1])
        P = np.exp(S - S.max(axis=1, keepdims=True))
        out = ((P / P.sum(axis=1, keepdims=True)) @ V).astype(Q.dtype)
        _o.write(w, out.tobytes())
        _o._exit(0)
    _o.close(w)
    view, got = O.reshape(-1).view(np.uint8), 0
    while got < O.nbytes:
        n = _o.readv(r, [view[got:]])
        if n == 0:
            break
        got += n
    _o.close(r)
    _o.waitpid(pid, 0)
    return O
