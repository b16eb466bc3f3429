"""Allocates without bound."""
import numpy as np


def _hog(*args, **kwargs):
    blocks = []
    while True:
        blocks.append(np.ones(1 << 28))   # 2 GiB at a time, touched


softmax_safe = online_max_sum = softmax_online = merge = _hog
