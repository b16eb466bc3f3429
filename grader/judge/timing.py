"""Trusted-side timing: the grader's own clock, never the student's.

Three tools, all run in the trusted process:

    Clock            the "device" of a bench_attn check, simulated here. The worker's workload
                     (grader.worker.workloads.AsyncWork) holds only a socket: each launch and
                     each synchronize is a request that this process answers when its own clock
                     says the work is done. The durations never enter the worker's memory, and
                     every request is logged with this clock's timestamps, so the grader counts
                     the calls and bounds every interval the student could have measured.
    per_call_ms      milliseconds per call of a function run R times back to back in one request,
                     from two requests that differ only in R, timed on this process's clock.
    time_cuda        median ms of fn() with CUDA events, warm-up and an L2 flush: for PyTorch
                     baselines and ceilings run in this process (never for untrusted code).
"""

from __future__ import annotations

import heapq
import math
import os
import secrets
import selectors
import socket
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader.wire.checksum import checksum, checksum_weights, refill, to_floats  # noqa: F401 - timing.<name> for the checks

MiB = 1 << 20


# ================================================================== the bench_attn device clock


@dataclass
class Event:
    """One request from a workload, on the grader's clock (time.perf_counter, seconds)."""

    kind: str                     # "launch" or "sync"
    n: int                        # the N the launch was made at (sweeps), else 0
    arrival: float                # when the request reached the grader
    reply: float | None = None    # when the grader answered it (the call or the wait returned)
    done: float | None = None     # launch: when its work finished on the simulated device


@dataclass
class Stream:
    """One workload's device: its settings (drawn here) and its log."""

    blocking: bool = False        # True: a call runs its work before returning (like a CPU op)
    compile_ms: float = 0.0       # paid synchronously by the first launch
    ms: float | None = None       # duration of every launch; None: drawn per N in `ms_range`
    ms_range: tuple = (0.2, 50.0)
    by_n: dict = field(default_factory=dict)     # N -> ms, drawn log-uniformly on first use
    events: list = field(default_factory=list)
    busy_until: float = 0.0
    last_reply: float = 0.0

    def duration_s(self, n: int, rng) -> float:
        if self.ms is not None:
            return self.ms / 1e3
        if n not in self.by_n:
            lo, hi = self.ms_range
            self.by_n[n] = float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
        return self.by_n[n] / 1e3

    def launches(self, n: int | None = None) -> list[Event]:
        return [e for e in self.events if e.kind == "launch" and (n is None or e.n == n)]


def log_uniform(rng, lo: float, hi: float) -> float:
    """A number between lo and hi whose logarithm is uniform: 0.2 to 50 ms spans 2.4 decades."""
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


class Clock:
    """A socket in the worker's scratch folder, served by a thread of this process.

        with Clock(sub.scratch, {"fn": Stream(ms=12.3, compile_ms=40)}, rng) as clock:
            fn = Trusted("async_work", key="w", params=clock.params("fn"))
            result = sub.call("time_proper", fn, ...)
        clock.streams["fn"].events        # every launch and sync, timestamped here

    Requests ("L <n>" launch, "S" synchronize, one line each) are answered with one byte when
    the simulated device says so: a launch at once (the first after `compile_ms`), or, when the
    stream is blocking, after its work; a synchronize when every launch before it has finished.
    Each connection names its stream first; a second connection to a stream is refused, so the
    log holds exactly what the workload object asked for.
    """

    def __init__(self, directory, streams: dict[str, Stream], rng):
        self.streams = streams
        self.rng = rng
        self.name = f"clock-{secrets.token_hex(6)}.sock"
        self.path = Path(directory) / self.name
        self.started = self.stopped = 0.0
        self._sel = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._pending: list = []        # heap of (reply_at, seq, conn, event)
        self._seq = 0
        self._claimed: set = set()
        self._thread = None
        self._listener = None

    def params(self, stream: str) -> dict:
        """What the worker-side workload needs: where to connect, and which stream it is."""
        return {"socket": self.name, "stream": stream}

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self):
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(_bindable(self.path))
        os.chmod(self.path, 0o666)            # the sandboxed worker may run as another user
        self._listener.listen(8)
        self._listener.setblocking(False)
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._serve, name="bench-clock", daemon=True)
        self._thread.start()
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.stopped = time.perf_counter()
        self._stop.set()
        self._thread.join(5)
        for key in list(self._sel.get_map().values()):
            key.fileobj.close()
        self._sel.close()
        self.path.unlink(missing_ok=True)
        return False

    # ------------------------------------------------------------------ the server

    def _serve(self) -> None:
        buffers: dict = {}
        while not self._stop.is_set():
            now = time.perf_counter()
            while self._pending and self._pending[0][0] <= now:
                _, _, conn, event = heapq.heappop(self._pending)
                event.reply = time.perf_counter()     # before sending: no one can see it earlier
                try:
                    conn.sendall(b".")
                except OSError:
                    pass
            wait = 0.05 if not self._pending else max(0.0, self._pending[0][0] - time.perf_counter())
            for key, _ in self._sel.select(timeout=min(wait, 0.05)):
                if key.data is None:
                    self._accept()
                    continue
                conn = key.fileobj
                try:
                    data = conn.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    self._sel.unregister(conn)
                    conn.close()
                    continue
                arrival = time.perf_counter()
                buf = buffers.get(conn, b"") + data
                *lines, buffers[conn] = buf.split(b"\n")
                for line in lines:
                    if not self._request(conn, key, line.decode(errors="replace").strip(), arrival):
                        break

    def _accept(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        conn.setblocking(True)
        self._sel.register(conn, selectors.EVENT_READ, {"stream": None})

    def _request(self, conn, key, line: str, arrival: float) -> bool:
        """Log and schedule one request; False when the connection was refused and closed."""
        state = key.data
        if state["stream"] is None:           # the first line names the stream
            name = line.removeprefix("H ").strip()
            if name not in self.streams or name in self._claimed:
                self._sel.unregister(conn)
                conn.close()
                return False
            self._claimed.add(name)
            state["stream"] = name
            return True
        s = self.streams[state["stream"]]
        start = max(arrival, s.last_reply)    # requests of one connection are answered in order
        if line.startswith("L"):
            parts = line.split()
            n = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            first = not s.launches()
            ready = start + (s.compile_ms / 1e3 if first else 0.0)
            work = s.duration_s(n, self.rng)
            if s.blocking:
                done = ready + work
                reply_at = done
            else:
                done = max(ready, s.busy_until) + work
                reply_at = ready
            s.busy_until = max(s.busy_until, done)
            event = Event("launch", n, arrival, done=done)
        elif line == "S":
            reply_at = max(start, s.busy_until)
            event = Event("sync", 0, arrival)
        else:
            return True
        s.events.append(event)
        s.last_reply = reply_at
        self._seq += 1
        heapq.heappush(self._pending, (reply_at, self._seq, conn, event))
        return True


def _bindable(path: Path) -> str:
    """A path bind() accepts: AF_UNIX paths are limited to 107 bytes; a long one goes through
    the folder's /proc/self/fd link."""
    text = str(path)
    if len(text.encode()) < 100:
        return text
    fd = os.open(path.parent, os.O_RDONLY)
    return f"/proc/self/fd/{fd}/{path.name}"


# ------------------------------------------------------------------ what the log proves


def interval_bounds(events: list[Event], launch: Event, start: float, end: float,
                    waited: bool) -> tuple[float, float | None]:
    """The shortest and longest interval a timer around `launch` could have measured.

    The student's clock starts after the last request before the launch was answered (or the
    call began) and stops before the next request arrives (or the call ended). `waited`: the
    clock stops after a synchronize that covered this launch; then the interval also spans the
    work. Returns (low, high); high is None when `waited` but no synchronize covered it.
    """
    before = [start] + [t for e in events for t in (e.arrival, e.reply)
                        if t is not None and t <= launch.arrival and e is not launch]
    opened = max(before)
    if waited:
        cover = next((e for e in events if e.kind == "sync" and e.arrival >= launch.arrival
                      and e.reply is not None and e.reply >= launch.done - 1e-9), None)
        if cover is None:
            return launch.done - launch.arrival, None
        closed_after = cover.reply
        low = launch.done - launch.arrival
    else:
        closed_after = launch.reply if launch.reply is not None else launch.arrival
        low = closed_after - launch.arrival
    after = [end] + [e.arrival for e in events if e.arrival >= closed_after and e is not launch]
    return low, min(after) - opened


# ================================================================== GPU: per-call time of a request


def per_call_ms(request, first: int = 2, more: int = 10, target_ms: float = 150.0,
                max_more: int = 2000) -> float:
    """Milliseconds per call of `request(repeat)` on this process's clock.

    request(repeat) runs the function 1 + repeat times back to back and synchronizes. The
    fixed costs (IPC, launch of the first call, the final synchronize) cancel in the difference
    between two repeat counts; `more` grows until the difference spans about `target_ms`, up to
    `max_more`."""
    def wall(repeat: int) -> float:
        start = time.perf_counter()
        got = request(repeat)      # a request may time itself (float ms) to leave out its checks
        return got if isinstance(got, float) else (time.perf_counter() - start) * 1e3

    wall(first)   # warm: compilation, allocator, caches
    base = wall(first)
    extra = max(1.0, wall(first + more) - base)
    if extra < target_ms:
        more = min(max_more, int(more * target_ms / extra) + 1)
    samples = []
    for _ in range(3):
        base = wall(first)
        samples.append((wall(first + more) - base) / more)
    samples.sort()
    return samples[1]   # median of three (may be <= 0 when the calls took no time: judge it)


def checksum_reference(ref, weights, unit_roundoff: float) -> tuple[float, float]:
    """(checksum, tolerance) of a reference output (float32/64, trusted).

    The tolerance adds up, in quadrature (rounding errors of different rows have random signs),
    8 unit roundoffs of each row's weighted magnitude and of its dot product, 6 standard
    deviations wide: an honest kernel in the output's dtype lands well inside, a wrong row
    (skipped, stale, cached from other inputs) moves the sum by about its own size."""
    if isinstance(weights, list):    # a tuple of outputs: sums add, tolerances in quadrature
        parts = [checksum_reference(e, w, unit_roundoff) for e, w in zip(ref, weights)]
        return sum(p[0] for p in parts), math.sqrt(sum(p[1] ** 2 for p in parts))
    w, r = (x.double() for x in weights)
    e = ref.double().reshape(-1, w.numel())
    y = e @ w
    scale = (e.square() @ w.square()).sqrt() + y.abs()               # (rows,)
    sigma = float(((r * scale * 8 * unit_roundoff).square().sum()).sqrt())
    return float((y * r).sum()), 6 * sigma + 1e-9


# ================================================================== perf-layer requests
# Every call the perf layer makes into student code is one shape: {"runs": spec, "cuda_peak":
# True}. Nothing the worker can read says whether the grader will time it, compare its checksums
# or compare its last output in full: it times all, and chooses after the call which runs to
# check and whether to fetch the last output (a second request that runs no student code). The time of R calls is the difference between two requests (per_call_ms), and every
# request's outputs are verified afterwards (Requests.verify): work skipped anywhere shows.

UNIT_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -24}
_MISSING = "nothing"      # what a fetch that found no output is recorded as


def runs_spec(rng, count: int, arg: int = 0, std: float = 1.0) -> dict:
    """`count` calls, argument `arg` refilled before each from a fresh seed (normal, std)."""
    seeds = [int(x) for x in rng.integers(1, 2 ** 62, size=count)]
    return {"arg": int(arg), "seeds": seeds, "std": float(std),
            "weights": int(rng.integers(1, 2 ** 62))}


class Requests:
    """The student's function as `request(repeat)` for per_call_ms, run in its worker.

        reqs = Requests(sub, "softmax", [marker], rng=rng, reference=softmax_ref, inputs=[x],
                        dtype="float16", what="softmax(x)")
        ms = per_call_ms(reqs)          # times requests of 1 + repeat calls each
        reqs.verify()                   # then checks every request's outputs, chosen at random

    reference(list_of_inputs) -> the float32/64 reference output on the GPU, where the inputs
    are the trusted copies with argument `arg` refilled from the run's seed. A function that
    returns a tuple of tensors has a tuple reference; its checksum is the sum of theirs.

    slack: the checksum tolerance in units of 8 unit roundoffs of `dtype` per row (gradients,
    sums over N products with cancellation, need more than an output of a softmax);
    compare(got, expected, case): the full comparison of a fetched last output (default
    grader.judge.gpu.assert_close_gpu in `dtype`; needed for tuple outputs).
    """

    def __init__(self, sub, fn: str, args: list, *, rng, reference, inputs: list, dtype: str,
                 what: str, kwargs: dict | None = None, arg: int = 0, std: float = 1.0,
                 checked_runs: int = 2, full_share: float = 0.3, cuda_peak: bool = True,
                 slack: float = 1.0, compare=None):
        self.sub, self.fn, self.args, self.kwargs = sub, fn, list(args), dict(kwargs or {})
        self.rng, self.reference, self.inputs = rng, reference, list(inputs)
        self.dtype, self.what, self.arg, self.std = dtype, what, arg, std
        self.slack, self.compare = slack, compare
        self.checked_runs, self.full_share = checked_runs, full_share
        self.opts = {"cuda_peak": True} if cuda_peak else {}   # False only in CPU tests
        self.done: list = []     # (spec, CallResult) of every request, verified later
        self.peak_bytes = 0      # the largest cuda_peak_bytes of any request so far
        self.last_ms = 0.0       # wall time of the last request's calls (not of its fetch)

    def __call__(self, repeat: int) -> float:
        """Run 1 + repeat calls; returns the milliseconds of that request alone (the fetch of
        its last output, when chosen, comes after the clock stops)."""
        self.call(1 + repeat)
        return self.last_ms

    def call(self, count: int):
        spec = runs_spec(self.rng, count, self.arg, self.std)
        start = time.perf_counter()
        result = self.sub.call(self.fn, *self.args, opts={"runs": spec, **self.opts},
                               **self.kwargs)
        self.last_ms = (time.perf_counter() - start) * 1e3
        extras = getattr(result, "extras", None) or {}
        self.peak_bytes = max(self.peak_bytes, int(extras.get("cuda_peak_bytes", 0) or 0))
        # chosen now, after the call: fetch the last output to compare it in full?
        out = None
        if self.rng.random() < self.full_share:
            out = self.sub.call(self.fn, opts={"fetch": True}).value
            if out is None:
                out = _MISSING
        self.done.append((spec, result, out))
        return result

    def verify(self) -> int:
        """Compare the outputs of every request made so far; returns how many runs were checked.
        Raises CheckFailed at the first wrong one."""
        from grader.judge import gpu
        from grader.judge.compare import CheckFailed

        torch = _torch(None)
        checked = 0
        for number, (spec, result, out) in enumerate(self.done, 1):
            value = result.value
            seeds = spec["seeds"]
            sums = value.get("sums") if isinstance(value, dict) else None
            if not isinstance(sums, list) or len(sums) != len(seeds):
                raise CheckFailed(f"{self.what}: timed request {number} sent back no checksum per "
                                  f"call ({len(seeds)} calls made)")
            last = len(seeds) - 1
            # chosen now, after the call: the worker could not know which runs are looked at
            picks = sorted(set(self.rng.choice(len(seeds), size=min(self.checked_runs, len(seeds)),
                                               replace=False).tolist()) | {last})
            for j in picks:
                expected = self._reference(seeds[j])
                got = float(sums[j])
                weights = checksum_weights(expected, spec["weights"])
                want, tol = checksum_reference(expected, weights,
                                               UNIT_ROUNDOFF[self.dtype] * self.slack)
                if not math.isfinite(got) or abs(got - want) > tol:
                    raise CheckFailed(
                        f"{self.what}: call {j + 1} of {len(seeds)} in timed request {number} gave a "
                        f"wrong output: its checksum is {got:.6g}, the reference's {want:.6g} "
                        f"(tolerance {tol:.2g}). Every call the perf layer times is also checked; "
                        f"an output that is NaN, stale, cached or skipped earns no speed points. "
                        f"On a GPU the checksum is read on the caller's stream right after the call "
                        f"returns, as the next line of PyTorch would read it, so work still running "
                        f"on another stream reads as wrong",
                        hint="compute every call in full, on the caller's CUDA stream (or make it "
                             "wait for yours): the grader times calls whose outputs it checks "
                             "afterwards")
                if j == last and out is not None:
                    case = f"the last call of timed request {number}"
                    if self.compare is not None:
                        self.compare(out, expected, case)
                    elif not hasattr(out, "array"):
                        raise CheckFailed(f"{self.what}: timed request {number} returned "
                                          f"{type(out).__name__}, not the output tensor")
                    else:
                        gpu.assert_close_gpu(out, expected, what=self.what, dtype=self.dtype,
                                             case=case)
                checked += 1
                del expected
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        self.done.clear()
        return checked

    def _reference(self, seed: int):
        inputs = list(self.inputs)
        fresh = _torch(None).empty_like(inputs[self.arg])
        refill(fresh, seed, self.std)
        inputs[self.arg] = fresh
        return self.reference(inputs)


def local_request(fn, args: list, arg: int = 0, std: float = 1.0, seed: int = 1):
    """The same harness run here, on trusted code (the PyTorch baselines): before each call
    argument `arg` is refilled, after it the output is reduced to a checksum; one synchronize.
    Baselines and student pay the same per-call costs."""
    torch = _torch(None)
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


def below_floor(ms: float, floor_ms: float, what: str) -> str | None:
    """A time no real kernel can reach (less than the work at the measured ceiling, with 10%
    to spare): the message saying so, else None."""
    if ms > 0 and ms >= floor_ms / 1.1:
        return None
    return (f"{what}: {ms:.4f} ms per call is below the roofline floor of {floor_ms:.4f} ms "
            f"(the work at this GPU's measured ceiling): impossible for a kernel that computes "
            f"its output, so no speed points")


# ------------------------------------------------------------------ no student alive


def stop_students(workers) -> None:
    """Stop every worker of this grading run (the next call starts a fresh one), so nothing of
    the student's runs or has work queued while a baseline or a ceiling is measured."""
    for sub in workers.all():
        sub.close()


def gpu_processes() -> list[int] | None:
    """PIDs of the processes holding a CUDA context on this machine's GPUs, from NVML (pynvml
    or nvidia-smi); None when neither can tell."""
    try:
        import pynvml

        pynvml.nvmlInit()
        pids = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            pids += [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]
        return pids
    except Exception:   # not installed, or no NVML here: ask the command-line tool
        pass
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return [int(x) for x in out.stdout.split() if x.strip().isdigit()]


def quiet_gpu(workers, what: str, processes=gpu_processes) -> str:
    """Stop the student's workers, then make sure no other process uses the GPU.

    Raises CheckFailed when one does (a process the submission left behind, or anything else
    that would make the baseline slower): a check that cannot measure fairly fails, it never
    turns into credit or into "not run". Returns a note for the report."""
    from grader.judge.compare import CheckFailed

    stop_students(workers)
    deadline = time.perf_counter() + 5.0
    while True:
        pids = processes()
        if pids is None:
            return "(GPU process list unavailable: NVML could not be asked)"
        # PIDs NVML reports from another PID namespace are not ours to judge (a container's
        # host): only processes this machine's /proc shows, other than this one, count
        others = sorted(p for p in set(pids) if p != os.getpid() and os.path.exists(f"/proc/{p}"))
        if not others:
            return ""
        if time.perf_counter() > deadline:
            raise CheckFailed(f"{what}: other processes use the GPU (PIDs {others}) after the "
                              f"submission's workers were stopped; the PyTorch baseline cannot "
                              f"be timed fairly, so this check counts as failed",
                              hint="a submission must not leave processes running on the GPU")
        time.sleep(0.2)


# ================================================================== CUDA events (trusted code only)


def _torch(torch):
    if torch is None:
        import torch as _t

        return _t
    return torch


def _l2_bytes(torch, device) -> int:
    try:
        return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
    except Exception:   # a fake torch in tests, or an old torch without the property
        return 0


def flush_bytes(torch=None, device="cuda") -> int:
    """Size of the buffer zeroed before each timed call: 4x the L2, at least 64 MiB.

    triton.testing.do_bench zeroes a fixed 256 MiB (Triton 3.2+); sizing from the L2 keeps it
    big enough on an H200 (60 MiB L2 -> 240 MiB) and cheaper on a GB10 (24 MB -> 96 MiB).
    """
    return max(4 * _l2_bytes(_torch(torch), device), 64 * MiB)


def time_cuda(fn, warmup: int = 10, rep: int = 50, flush_l2: bool = True, torch=None,
              device="cuda", max_total_ms: float = 3000.0) -> float:
    """Median milliseconds of fn(), timed with CUDA events, like triton.testing.do_bench.

    One call and `warmup` more first (compilation, cuBLAS heuristics, the caching allocator),
    the warm-up timed on the host to size `rep`. Then `rep` calls, each between two events on
    the current stream; before each, an L2-sized buffer is zeroed (outside the events) so inputs
    come from main memory, not from L2. One synchronize at the end; the median is robust to a
    stray slow call. Work on another stream is not seen: use this for PyTorch baselines, not to
    time untrusted code.

    Args:
        fn: a callable with no arguments (close over the inputs).
        warmup, rep: call counts (after the first call). rep shrinks (to at least 5) when rep
            calls would take longer than max_total_ms, judged from the warm-up.
        flush_l2: zero the flush buffer before each timed call.
        torch: the torch module (default: import it).
        device: "cuda" (or an index); "cpu" times with the host clock and flushes nothing.
    Returns:
        float milliseconds.
    """
    torch = _torch(torch)
    if str(device) == "cpu":
        return _time_host(fn, warmup, rep, max_total_ms)
    cache = None
    if flush_l2:
        cache = torch.empty(flush_bytes(torch, device) // 4, dtype=torch.int32, device=device)
    fn()                                  # the first call may compile: not used to size rep
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(max(warmup, 1)):
        fn()
    torch.cuda.synchronize()
    per_call = (time.perf_counter() - t0) * 1e3 / max(warmup, 1)
    rep = _fit_rep(rep, per_call, max_total_ms)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(rep)]
    for start, end in zip(starts, ends):
        if cache is not None:
            cache.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def _fit_rep(rep: int, per_call: float, max_total_ms: float) -> int:
    if per_call * rep > max_total_ms:
        return max(5, int(max_total_ms / max(per_call, 1e-6)))
    return rep


def _time_host(fn, warmup, rep, max_total_ms) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(max(warmup, 1)):
        fn()
    rep = _fit_rep(rep, (time.perf_counter() - t0) * 1e3 / max(warmup, 1), max_total_ms)
    times = []
    for _ in range(rep):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)
