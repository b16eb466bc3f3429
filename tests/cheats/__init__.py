"""The cheat corpus: each folder here holds one exercise file, `<cheat>/<exercise>.py`, that tries
to earn points its own code did not earn. A function a cheat does not need raises
NotImplementedError, so the whole exercise is the cheat's: it must earn nothing on it.

tests/test_cheats.py grades each cheat on its whole exercise, every CPU layer the exercise has,
hidden checks included; tools/gpu_cheats.py grades the ones in GPU on the gpu and perf layers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cheat:
    name: str                 # folder under tests/cheats
    exercise: str
    says: str = ""            # words some failing check of the exercise must say (why)
    audit: bool = False       # the static audit must flag it: a message names the file and line
    # which checks must score 0: "all" of its exercise, or the checks built to catch it, for a
    # cheat whose other answers are computed by its own code in the call that is graded
    # (hard-coded for the public lengths, cached for shapes a check never repeats): the hidden
    # checks, with other lengths and every shape twice with fresh values
    zero_on: str | tuple = "all"
    cpu: bool = True          # False: honest on the CPU, a cheat only on a GPU (not graded here)


CHEATS = [
    Cheat("torch_softmax", "softmax_triton", says="launched no Triton kernel"),
    Cheat("sdpa_with_dummy_launch", "flash_triton", says="computed with PyTorch"),
    Cheat("naive_tiled", "tiled_attention", says="N x N"),
    Cheat("cache_by_shape", "online_softmax"),
    Cheat("cache_by_call", "tiled_attention", says="call 2 of 2",
          zero_on=("tiled_attention.hidden_shapes",)),
    Cheat("softmax_empty", "softmax_triton", says="never written"),
    Cheat("flash_skip_last_store", "flash_triton", says="never written"),
    Cheat("hardcoded_lengths", "online_softmax", zero_on=("online_softmax.hidden_shapes",)),
    # issue 9: evidence gathered where student code can steer it
    Cheat("thread_sdpa", "flash_triton", audit=True),
    Cheat("subprocess_softmax", "softmax_triton", audit=True),
    Cheat("numpy_behind_launch", "softmax_triton"),
    Cheat("patch_probe", "flash_triton", audit=True),
    Cheat("mmap_scores", "tiled_attention"),
    Cheat("timed_call_skip", "flash_triton", audit=True),
    Cheat("bench_private_fields", "bench_attn"),
    # the real kernel on a side stream, returned before it finishes: honest under the
    # interpreter; on a GPU a race that earns no perf points (tests/test_cheats.py)
    Cheat("side_stream", "flash_triton", cpu=False),
    # issue 12: the wrapper's backward in eager PyTorch (on CUDA it runs on autograd's thread)
    Cheat("eager_backward", "flash_backward", says="computed with PyTorch"),
]

# graded on the GPU layers by tools/gpu_cheats.py, where their effect is the point: threads,
# helper processes, the timed-call skip, the probe patch and the profiler-based kernel check
# (SDPA or torch.softmax behind a launch), unwritten outputs, the bench timers. Each must earn 0
# there too; side_stream must pass gpu_real_sizes and earn no perf points (a race).
# (numpy_behind_launch and the NumPy cheats cannot run on CUDA tensors at all.)
GPU = [c for c in CHEATS if c.name in (
    "torch_softmax", "sdpa_with_dummy_launch", "softmax_empty", "flash_skip_last_store",
    "thread_sdpa", "subprocess_softmax", "patch_probe", "timed_call_skip", "bench_private_fields",
    "side_stream", "eager_backward")]
