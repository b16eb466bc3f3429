"""Print 2 GiB (in 1 MiB pieces) at import and in every call."""
import os
import sys

CHUNK = "x" * (1 << 20)


def flood():
    for _ in range(2048):
        try:
            sys.stdout.write(CHUNK)
        except OSError:
            try:
                os.write(2, CHUNK.encode())
            except OSError:
                return


flood()


def softmax_safe(x):
    flood()
    raise NotImplementedError


online_max_sum = softmax_online = merge = softmax_safe
