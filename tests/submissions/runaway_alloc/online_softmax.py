"""Allocates without bound."""
import numpy as np


def _hog(*args, **kwargs):
    blocks = []
    while True:
        blocks.append(np.empty(1 << 28))   # 2 GiB of address space at a time, without end


softmax_safe = online_max_sum = softmax_online = merge = _hog
