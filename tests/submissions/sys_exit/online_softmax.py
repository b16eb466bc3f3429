"""Calls sys.exit from inside a graded function."""
import sys


def _leave(*args, **kwargs):
    sys.exit(3)


softmax_safe = online_max_sum = softmax_online = merge = _leave
