"""Dereferences a null pointer: the worker dies with SIGSEGV."""
import ctypes


def _crash(*args, **kwargs):
    ctypes.string_at(0)


softmax_safe = online_max_sum = softmax_online = merge = _crash
