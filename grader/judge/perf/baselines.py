"""The PyTorch baselines the student's times are compared with, timed here in the student's
harness, and the one FLOPs formula.

    flops = attention_flops(B, H, N, D, causal, backward)
    best = sdpa_ms(q, k, v, causal=causal, do=do)      # {"fwd": (ms, backend), "bwd": ...}
    ms = timing.per_call_ms(local_request(fn, [x]))    # any trusted fn(x), refilled and summed
    t, = timed_against(sub, rng, gpu, workers, "softmax", cases, ...)   # student vs baseline

Runs in the trusted process only (the bench tool, the perf layer): no student code is called
here but through timed_against's requests (grader.judge.perf.timed_requests.Requests). The
attention baseline is the fastest SDPA backend that runs here, each backend's output checked
before it is timed (a backend that is unavailable or wrong is left out, with the reason). Every
baseline is timed in the same harness as the student's calls (`local_request`: an input
refilled before each call, a checksum of the outputs after), and the harness's own cost
(`harness_gpu_ms`) comes off both.
"""

from __future__ import annotations

import contextlib

from grader.judge.perf import timed_requests, timing
from grader.judge.perf.events import torch_or_default
from grader.wire.checksum import checksum, checksum_weights, refill, to_floats

# the fused backends; MATH (the N x N one) is never the fastest and is not a fair baseline
FASTEST_BACKENDS = ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION")


def attention_flops(B: int, H: int, N: int, D: int, causal: bool = False,
                    backward: bool = False) -> float:
    """4*B*H*N^2*D for the forward (two matmuls of 2*N^2*D each per head), halved when causal;
    the backward counts 2.5x the forward (five matmuls, the recomputation of S included)."""
    flops = 4 * B * H * N * N * D / (2 if causal else 1)
    return 2.5 * flops if backward else flops


def backend_context(backend: str | None):
    """sdpa_kernel(SDPBackend.<backend>), or no constraint for None (PyTorch's own choice)."""
    if backend is None:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(getattr(SDPBackend, backend))


def harness_ms(fn, args, target_ms: float = 150.0) -> float:
    """ms per call of trusted `fn(*args)` in the perf layer's harness (argument 0 is refilled
    before every call, so it is given a copy)."""
    return timing.per_call_ms(local_request(fn, [args[0].clone(), *args[1:]]),
                              target_ms=target_ms)


def sdpa_ms(q, k, v, *, causal: bool = False, do=None, backends=FASTEST_BACKENDS, check=None,
            timer=harness_ms, target_ms: float = 150.0) -> dict:
    """The fastest SDPA backend for the forward and, given `do`, the backward:
    {"fwd": (ms, backend), "bwd": (ms, backend), "failed": ["BACKEND: why", ...]}, with
    (inf, "none") for a pass no backend ran.

    check(pass, out) raises AssertionError when a backend's output (the forward's o, or the
    backward's (dq, dk, dv)) is wrong; it runs once per backend before that backend is timed.
    The backward is torch.autograd.grad on a graph kept across calls, dO refilled each call.
    timer(fn, args, target_ms) -> ms; backends: names of SDPBackend, None for PyTorch's choice."""
    from grader.sandbox import calllog

    with calllog.span("sdpa_baseline", shape=list(q.shape), causal=causal, bwd=do is not None):
        return _sdpa_ms(q, k, v, causal, do, backends, check, timer, target_ms)


SCREEN = 1.15   # a backend within this factor of the fastest in the short timing is timed in full


def _sdpa_ms(q, k, v, causal, do, backends, check, timer, target_ms) -> dict:
    """Every backend checked and timed briefly (an eighth of `target_ms`); those within SCREEN of
    the fastest per pass timed again in full, the faster of the two timings kept. A backend far
    behind in the short timing cannot be the baseline, and is not timed for long."""
    import torch
    import torch.nn.functional as F

    def sdpa(a, b, c):
        return F.scaled_dot_product_attention(a, b, c, is_causal=causal)

    def timed(backend, span: float, checked) -> dict:
        with backend_context(backend):
            got = {"fwd": _checked_ms(sdpa, (q, k, v), "fwd", checked, timer, span)}
            if do is not None:
                leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
                out = sdpa(*leaves)
                got["bwd"] = _checked_ms(
                    lambda g: torch.autograd.grad(out, leaves, g, retain_graph=True),
                    (do,), "bwd", checked, timer, span)
                del out, leaves
        return got

    best = {"fwd": (float("inf"), "none"), "failed": []}
    if do is not None:
        best["bwd"] = (float("inf"), "none")
    short = {}
    for backend in backends:
        try:
            short[backend] = timed(backend, max(10.0, target_ms / 8), check)
        except (RuntimeError, AssertionError) as e:
            best["failed"].append(f"{backend or 'default'}: {_first_line(e)[:120]}")
    for backend, got in short.items():
        close = [p for p, ms in got.items()
                 if ms <= SCREEN * min(other[p] for other in short.values())]
        if close:
            try:                                     # already checked, on the same inputs
                full = timed(backend, target_ms, None)
                got = {p: min(ms, full[p]) if p in close else ms for p, ms in got.items()}
            except RuntimeError as e:                # kept at its short timing
                best["failed"].append(f"{backend or 'default'} (timed again): "
                                      f"{_first_line(e)[:120]}")
        for p, ms in got.items():
            best[p] = min(best[p], (ms, backend or "default"))
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return best


def fastest_sdpa(q, k, v, *, causal: bool = False, do=None) -> dict:
    """sdpa_ms for the perf layer: measured once per device and software within a batch
    (grader.judge.perf.measured_once), so every submission is compared with the same baseline."""
    from grader import options
    from grader.judge.perf.measured_once import measured_once

    if not options.current().measurements:   # a single grade: its checks cross-check their own baselines
        return sdpa_ms(q, k, v, causal=causal, do=do)
    args = {"shape": list(q.shape), "dtype": str(q.dtype), "causal": bool(causal),
            "backward": do is not None}

    def measure() -> dict:
        # twice, the faster of each pass kept: a baseline slowed once (another process on the
        # GPU) would otherwise stand for the whole batch; it can only ever be slowed
        a, b = (sdpa_ms(q, k, v, causal=causal, do=do) for _ in range(2))
        return {**a, **{p: min(a[p], b[p]) for p in ("fwd", "bwd") if p in a}}

    return measured_once("sdpa", args, measure)


def _checked_ms(fn, args, p: str, check, timer, target_ms: float) -> float:
    """Validate, then time: one plain call checked by `check`, then `timer`."""
    out = fn(*args)
    if check is not None:
        check(p, out)
    del out
    return timer(fn, args, target_ms)


def _first_line(e) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


# ====================================================== the harness run here, and a baseline


def local_request(fn, args: list, arg: int = 0, std: float = 1.0, seed: int = 1):
    """The same harness run here, on trusted code (the PyTorch baselines): before each call
    argument `arg` is refilled, after it the output is reduced to a checksum; one synchronize.
    Baselines and student pay the same per-call costs."""
    torch = torch_or_default(None)
    args = list(args)
    state = {"seed": seed, "weights": None}

    def request(repeat: int):
        sums = []
        for _ in range(1 + repeat):
            state["seed"] += 1
            refill(args[arg], state["seed"], std)
            out = fn(*args)
            if state["weights"] is None:
                state["weights"] = checksum_weights(out, 7)
            sums.append(checksum(out, state["weights"]))
            del out
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return to_floats(sums)

    return request


def harness_gpu_ms(t, std: float = 1.0, repeat: int = 100, passes: int = 2) -> float:
    """What the harness adds per call to a loop the GPU is the bottleneck of: the GPU time of
    refilling `t` and taking a checksum of an output like it, with the GPU kept busy (a sleep
    kernel) while the CPU queues every call, so no launch overhead is counted. A wall-clock
    measurement of the harness alone counts its Python overhead too, which in a GPU-bound loop
    hides behind the kernels: taking that off made a decode kernel read at 1.4x the copy
    bandwidth on the H200 (0.098 ms taken off a 0.278 ms call). On a CPU: the wall clock.
    The smallest of `passes` measurements: a stalled one must not come off the student's time."""
    return min(_harness_pass(t, std, repeat) for _ in range(passes))


def _harness_pass(t, std: float, repeat: int) -> float:
    torch = torch_or_default(None)
    if t.device.type != "cuda":
        return timing.per_call_ms(local_request(lambda x: x, [t], std=std))
    weights = checksum_weights(t, 7)
    for i in range(3):                      # warm: allocator, generator, kernels
        refill(t, 1 + i, std)
        checksum(t, weights)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(200_000_000)          # about 0.1 s: the CPU gets ahead meanwhile
    start.record()
    for i in range(repeat):
        refill(t, 10 + i, std)
        checksum(t, weights)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeat


def _now(work) -> None:
    work()


class Timed:
    """One function of the student's timed against a PyTorch baseline on the same input
    (`timed_against`): the readings as measured (`mine_ms`, `base_ms`: timing.Readings), and
    per-call milliseconds of each with the harness's refill and checksum taken out (`harness`,
    what was taken); GB/s of `moved` bytes, the copy bandwidth of the run and a note for the
    report."""

    def __init__(self, mine, base, harness: float, moved: int, copy: float, note: str):
        self.mine_ms, self.base_ms = mine, base
        self.mine, self.base = float(mine) - harness, float(base) - harness
        self.harness, self.copy, self.note, self.moved = harness, copy, note, moved
        self.gbs = moved / self.mine / 1e6
        self.of_copy = of_copy(moved, copy)
        self.fraction = self.of_copy(self.mine)


def of_copy(nbytes: int, copy: float):
    """A time per call in ms -> the fraction of the copy bandwidth (`copy` GB/s) that moving
    `nbytes` in it reaches: the one bytes-to-fraction formula of the bandwidth checks."""
    return lambda ms: nbytes / ms / 1e6 / copy


def timed_against(sub, rng, gpu, workers, name: str, cases: list, dtype: str, baseline,
                  reference, gated=None, after_timing=None) -> list[Timed]:
    """`name`(x) of the submission as timed requests, every output verified, against
    `baseline`(x) run here, for each (marker, x, moved bytes, what) of `cases`: both pay the same
    refill and checksum per call, measured here with nothing of the student's alive and taken
    off both. The student's requests come first (all in one worker: a submission that fails
    costs no baseline), then, its workers stopped, the baseline and the harness cost (the
    smaller of two measurements: harness_gpu_ms). The floor judges the student's time as
    measured, before the harness's cost comes off. Every request's verification and `gated()`
    (the check's gated calls, traced and profiled: the gate's profiler slows every later launch
    in its process, so it never runs before a timing) go to `after_timing` (the check's fixture: after
    the check's timing); without it they run here, right after the student's requests."""
    from grader.judge.answers.compare import CheckFailed
    from grader.judge.perf.quiet_gpu import quiet_gpu
    from grader.sandbox import calllog

    after_timing = after_timing or _now
    mine = []
    for marker, x, _, what in cases:
        reqs = timed_requests.Requests(sub, name, [marker], rng=rng, inputs=[x], dtype=dtype,
                                       reference=reference, what=f"{name}(x)")
        mine.append(timing.per_call_ms(reqs))
        after_timing(reqs.checked())
    if gated is not None:
        after_timing(gated)
    note = quiet_gpu(workers, ", ".join(c[3] for c in cases))
    copy = gpu.ceiling("copy_gbs")
    out = []
    for (_, x, moved, what), ms in zip(cases, mine):
        with calllog.span("local_baseline", what=what):
            harness = harness_gpu_ms(x.clone())   # what it adds to a GPU-bound loop
            base = timing.per_call_ms(local_request(baseline, [x.clone()]))
        impossible = timing.below_floor(ms, moved / copy / 1e6, what)
        if impossible:
            raise CheckFailed(impossible)
        out.append(Timed(ms, base, harness, moved, copy, note))
    return out
