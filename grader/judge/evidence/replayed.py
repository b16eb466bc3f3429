"""What a replay gave, against what the call returned (grader.judge.evidence.provenance replays).

    compare       an untimed gated call: the replayed outputs equal the returned ones exactly
                  (NaN equal to NaN), or within ATOMIC_TOL where a kernel adds with atomics
    compare_sum   a timed call of the perf layer (TimedCall): the replay's checksum, taken in
                  the replay worker as the timed call's was, equal to the call's to the last bit
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grader.judge.answers.compare import CheckFailed

# atomics on a GPU add in any order: float sums then differ by rounding (relative to the
# tensor's largest value); the interpreter runs programs in order and stays exact
ATOMIC_TOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-5, "float64": 1e-12}


@dataclass
class TimedCall:
    """A timed call of the perf layer (grader.judge.perf.timed_requests.Requests), as its replay
    needs it: how its argument was refilled ({"arg", "seed", "std"}), how its checksum was taken
    ({"weights": seed, "tuple": bool}), the checksum it sent back (`want`) and the tolerance of
    that checksum against the reference (`tol`, used only where a kernel adds with atomics).
    Once its replay matched: `peak_bytes`, the most memory the replayed steps held at once
    beyond the inputs, counted in the replay worker (None where it counts none: not CUDA)."""
    refill: dict
    summed: dict
    want: float
    tol: float
    peak_bytes: int | None = None


def refused(call: str, what: str) -> CheckFailed:
    return CheckFailed(f"{call}: {what}", hint="The answer must be what your Triton kernels "
                       "computed from the call's inputs: the wrapper only allocates, views, "
                       "copies and launches.")


def tensors_of(value, depth: int = 0) -> list:
    """The tensors of a decoded value in the order grader.worker.program lists them."""
    if hasattr(value, "array") and hasattr(value, "stride"):
        return [value]
    if depth >= 4:
        return []
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_of(v, depth + 1)]
    return []


def _not_tensors(value, depth: int = 0) -> str:
    """What in a returned value is neither a tensor nor None (a NumPy array, a number), named."""
    if value is None or (hasattr(value, "array") and hasattr(value, "stride")):
        return ""
    if isinstance(value, (list, tuple, dict)) and depth < 4:
        items = value.values() if isinstance(value, dict) else value
        return next((w for w in (_not_tensors(v, depth + 1) for v in items) if w), "")
    return f"a {type(value).__name__}" if not isinstance(value, np.ndarray) else "a NumPy array"


def replay_failed(replayed, call: str) -> None:
    if not isinstance(replayed, dict):
        raise CheckFailed(f"{call}: the replay sent back nothing readable")
    for problem in replayed.get("compile") or []:
        raise refused(call, f"kernel {problem.get('kernel')} does not compile with Triton's front "
                          f"end, so what it computed under the interpreter does not count:\n"
                          f"{str(problem.get('error'))[:1200]}")
    if replayed.get("error"):
        raise refused(call, f"replaying its recorded steps failed: {replayed['error']}")


def compare_sum(replayed, timed: TimedCall, call: str, atomics: bool) -> None:
    """A timed call: the replayed outputs' checksum against the one the call sent back; on a
    match, the replay's memory peak goes to `timed.peak_bytes`."""
    import math

    replay_failed(replayed, call)
    got = replayed.get("sum")
    if not isinstance(got, float):
        raise CheckFailed(f"{call}: the replay sent back no checksum")
    same = got == timed.want or (atomics and math.isfinite(got)
                                 and abs(got - timed.want) <= timed.tol)
    if not same:
        raise refused(call, f"its answer is not what its kernels compute: replaying the recorded "
                          f"launches on the call's own inputs gives an output whose checksum is "
                          f"{got!r}, the call's was {timed.want!r} (the same kernels on the same "
                          f"inputs give the same bits). The answer of a timed call was written "
                          f"by something other than the kernels (PyTorch, NumPy, memory set "
                          f"before the launch)")
    peak = replayed.get("peak_bytes")
    timed.peak_bytes = peak if type(peak) is int and peak >= 0 else None


def compare(replayed, value, call: str, atomics: bool) -> None:
    replay_failed(replayed, call)
    other = _not_tensors(value)
    if other:
        raise refused(call, f"it returned {other}: the answer of a Triton exercise is the tensors "
                          f"its kernels wrote, and only those can be replayed")
    got, want = tensors_of(replayed.get("outputs")), tensors_of(value)
    if len(got) != len(want):
        raise refused(call, f"the replay made {len(got)} output tensors, the call returned "
                          f"{len(want)}")
    for i, (g, w) in enumerate(zip(got, want)):
        _same(np.asarray(g.array), np.asarray(w.array), w.dtype, call, i, atomics)


def _same(replayed, returned, dtype: str, call: str, i: int, atomics: bool) -> None:
    what = f"output {i}" if i else "the output"
    if replayed.shape != returned.shape:
        raise refused(call, f"replayed, {what} has shape {replayed.shape}, the call returned "
                          f"{returned.shape}")
    if _same_bits(replayed, returned):   # the same kernels on the same inputs: every bit
        return
    a, b = replayed.astype(np.float64), returned.astype(np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    if atomics and dtype in ATOMIC_TOL:
        scale = max(float(np.nanmax(np.abs(b), initial=0.0)), 1.0)
        close = np.abs(a - b) <= ATOMIC_TOL[dtype] * scale
    else:
        close = a == b
    differs = ~(close | both_nan)
    if differs.any():
        idx = tuple(int(j) for j in np.unravel_index(int(np.argmax(differs)), b.shape))
        raise refused(call, f"{what} is not what its kernels compute: replaying the recorded "
                          f"launches on the same inputs gives {a[idx]:.6g} at {list(idx)}, the "
                          f"call returned {b[idx]:.6g} ({int(differs.sum())} of {b.size} elements "
                          f"differ). The answer was written by something other than the "
                          f"kernels (PyTorch, NumPy, a thread, memory set before the launch)")


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays of one dtype hold the same bytes (NaNs of the same bits included): the
    common case, decided in milliseconds, where comparing as float64 takes a third of a second
    for a 16 MB output; anything else goes on to the elementwise comparison and its message."""
    if a.dtype != b.dtype or a.dtype.kind not in "fiub" or a.dtype.itemsize not in (1, 2, 4, 8):
        return False
    bits = np.dtype(f"u{a.dtype.itemsize}")
    return bool(np.array_equal(np.ascontiguousarray(a).view(bits), np.ascontiguousarray(b).view(bits)))
