"""Return values the codec cannot carry: a 5000-digit integer, a list nested 100000 deep, ten
million integers, an exception whose message cannot be printed."""


class Evil(Exception):
    def __str__(self):
        raise RuntimeError("no message for you")


def softmax_safe(x):
    return 10 ** 5000


def online_max_sum(x):
    v = []
    for _ in range(100000):
        v = [v]
    return v


def softmax_online(x):
    return list(range(10_000_000))


def merge(a, b):
    raise Evil()
