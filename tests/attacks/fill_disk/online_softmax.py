"""Fill the disk: write 64 MiB files into the working folder (the worker's scratch) until the
write fails, up to 3 GiB, at import and in every call, and say how far it got."""
import os

CHUNK = b"x" * (16 << 20)


def fill():
    written = 0
    try:
        for i in range(48):
            with open(f"fill{os.getpid()}-{i}.bin", "wb") as f:
                for _ in range(4):
                    f.write(CHUNK)
                    written += len(CHUNK)
    except OSError as e:
        return f"FILLED {written >> 20} MiB, then {e.strerror}"
    return f"FILLED {written >> 20} MiB, no error"


fill()


def softmax_safe(x, *rest):
    raise RuntimeError(fill())


online_max_sum = softmax_online = merge = softmax_safe
