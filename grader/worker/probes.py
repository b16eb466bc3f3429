"""Worker-side measurements around one student call, asked for by the trusted side in `opts`.

Everything here runs in the worker, next to student code, so its numbers are evidence, not
verdicts: the trusted side cross-checks what it can (its own clock, the inputs sent back).

opts keys (all optional):
  tracemalloc: bool   peak Python/NumPy allocation during the call → extras["peak_bytes"]
  trace: bool         torch ops and Triton launches during the call → extras["ops"], extras["launches"]
  program: bool       (with trace) the call's program: every storage it touched, the allowed ops
                      and launches that made them, the returned tensors (grader.worker.program)
                      → extras["program"], which the trusted side replays from the kernels alone
  return_args: bool   the tensor/array arguments after the call, with the poison behind each
                      tensor → extras["args_after"], extras["guards_after"]
  sync: bool          torch.cuda.synchronize() before returning, so asynchronous faults and
                      work left running show up inside the call
  runs: dict          the perf layer's calls: R calls with fresh inputs, a checksum each (see `run`)
  poison_empty: bool  torch.empty/empty_like/... return NaN-filled tensors (integers: their
                      max) during the call, on any device, through torch's deterministic mode
                      (torch.utils.deterministic.fill_uninitialized_memory): an output element
                      the kernel never writes reads as NaN instead of old memory
  bounds: bool        (Triton interpreter) every tl.load/tl.store/atomic is checked, lane by
                      lane, against the tensors the call may touch: the inputs built here (their
                      own elements, not the guard behind them) and every tensor allocated during
                      the call or passed to a launch (its whole storage). A lane outside them
                      is switched off before it touches memory (a load gets `other`, a store
                      writes nothing), so nothing past the end is read or corrupted, and is
                      recorded → extras["out_of_bounds"]: [{access, line, code, tensor, lanes,
                      past}]. Stores into tensors allocated during the call are tracked too →
                      extras["allocations"]: [{numel, dtype, unstored, first_unstored,
                      stored_nan}] (elements no store ever wrote, and stored NaN)
  trace, compiled:    with trace (or kernels), every compiled Triton launch is described from
                      the CompiledKernel Triton returned (grader.worker.resources) →
                      extras["compiled"]: [{name, num_warps, num_stages, constexprs, arch, shared,
                      n_regs, n_spills, autotuned?, target?}]; nothing under the interpreter
  target: dict        {"arch": 121, "warp_size": 32, "fallback": [120, 80]}: each kernel is also
                      compiled (not launched) for that GPU → its record's "target": {arch_asked,
                      arch, shared} or {error}; once per kernel specialisation per worker
  kernels: bool       (CUDA) the device kernels that ran during the call, from every thread of
                      the process, recorded by torch.profiler (CUPTI) → extras["kernels"]; the
                      names of the Triton kernels launched → extras["triton_kernels"]
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import tracemalloc as _tracemalloc

import numpy as np

from grader.wire import checksum
from grader.worker import bounds, call_inputs, recorders, tracing, workloads   # imported here,
# never inside a measured call, nor after student code ran (it may have set
# sys.modules["grader..."] = None, or planted a module of that name there)

# state of the call being run (the worker runs one call at a time; its inputs: call_inputs)
_program: list = [None]     # the program.Program of the gated call being traced, if asked for


@contextlib.contextmanager
def around_call(opts: dict, args: list, kwargs: dict):
    extras: dict = {}
    stack = contextlib.ExitStack()
    try:
        if opts.get("tracemalloc"):
            stack.enter_context(_tracemalloc_peak(extras))
        if opts.get("kernels"):
            stack.enter_context(tracing.cuda_kernels(extras))
        if opts.get("trace") or opts.get("kernels"):
            target = opts.get("target")
            stack.enter_context(trace(extras, target if isinstance(target, dict) else None,
                                      record=bool(opts.get("program"))))
        if opts.get("bounds"):
            stack.enter_context(bounds.checked(extras, call_inputs.built_inputs()))
        if opts.get("poison_empty"):
            stack.enter_context(_poison_empty())
        with stack:
            yield extras
        if opts.get("return_args"):
            extras["args_after"] = [a for a in args if _is_array(a)]
            extras["guards_after"] = call_inputs.guards()
    finally:
        call_inputs.forget_inputs()
        # how student code read each recorder input of this call (grader.worker.recorders)
        reads = recorders.collect()
        if reads:
            extras["reads"] = reads
        # the next call's outside memory count (grader/sandbox/memory.py) starts from what is
        # held, not from what this call freed and the C allocator kept (a fraction of a ms)
        _trim_heap()


def run(fn, args: list, kwargs: dict, opts: dict):
    """Call the student function: once, or once per entry of `runs` (the perf layer).

    runs: {"arg": i, "seeds": [s0, s1, ...], "std": float, "weights": seed}
        Every call of the perf layer has this one shape, whether the grader will time it, check
        it in full, or both: R = len(seeds) calls back to back, and before call j, argument i is
        refilled in place from seed s_j (grader.wire.checksum.refill: fresh values every call, so
        nothing can be cached). Right after each call its output is reduced to one checksum
        (checksum.checksum, weights drawn from `weights`); then one synchronize. The value sent
        back is {"sums": [one checksum per call]}; the last output stays here until the next
        such request. The grader picks, after the call, which checksums to compare with its
        references and whether to fetch the last output and compare it in full, so a call that
        skips its work is caught wherever it falls.
        With "program": True (the graded function of a Triton exercise), every call is traced
        and its program recorded (grader.worker.program), as an untimed gated call's is: the
        grader asks afterwards for the programs of calls it picks and replays one
        (grader.judge.perf.timed_requests.Requests, grader.fixtures.ProvingSubmission.check_timed), so a
        timed call's answer too must be what its kernels computed. Every call pays the same
        recording, whether picked or not.
    fetch: True   send back the last output of the previous `runs` request; fn is not called.
    programs: [j, ...]   send back the recorded programs of those calls of the previous `runs`
        request (`{"programs": [extras of call j, ...]}`); fn is not called.
    backward: {"grad_arg": n}   (flash_backward's autograd wrapper) the arguments before n get
        requires_grad, out = fn(those, **kwargs), then out.backward(args[n]); the value sent
        back is (out, (grad of each of them)), detached.
    Workloads (bench_attn) given to the call answer torch.cuda.synchronize() too.
    """
    if opts.get("fetch"):
        value, _retained[0] = _retained[0], None
        return value
    if "programs" in opts:
        kept = _retained_programs
        return {"programs": [kept[j] if isinstance(j, int) and 0 <= j < len(kept) else None
                             for j in list(opts["programs"])[:8]]}
    value = _run(fn, args, kwargs, opts)
    if _program[0] is not None:   # the tensors of the answer, as refs of the call's program
        _program[0].set_outputs(value)
    return value


def _run(fn, args: list, kwargs: dict, opts: dict):
    if opts.get("backward"):
        n = int(opts["backward"]["grad_arg"])
        inputs = [a.requires_grad_(True) for a in args[:n]]
        out = fn(*inputs, *args[n + 1:], **kwargs)
        out.backward(args[n])
        return out.detach(), tuple(None if a.grad is None else a.grad.detach() for a in inputs)
    with workloads.routed_synchronize():
        runs = opts.get("runs")
        if runs:
            return _run_many(fn, args, kwargs, runs)
        value = fn(*args, **kwargs)
        if opts.get("sync"):
            import torch

            torch.cuda.synchronize()
        return value


_retained: list = [None]   # the last output of the last `runs` request, until it is fetched
_retained_programs: list = []   # with runs["program"]: each call's trace of the last request


def _run_many(fn, args, kwargs, runs: dict) -> dict:
    import torch

    # the previous request's output (if not fetched) stays until the end of this request
    target = args[int(runs["arg"])]
    sums, out, weights = [], None, None
    record = bool(runs.get("program"))
    _retained_programs.clear()
    for seed in runs["seeds"]:
        checksum.refill(target, int(seed), float(runs["std"]))
        out = None                        # the previous output is freed before the next call
        if record:
            out = _recorded_call(fn, args, kwargs)
        else:
            out = fn(*args, **kwargs)
        if weights is None:
            weights = checksum.checksum_weights(out, int(runs["weights"]))
        sums.append(checksum.checksum(out, weights))
    if torch.cuda.is_available():         # the repo's tests run this on CPU tensors
        torch.cuda.synchronize()
    _retained[0] = out
    return {"sums": checksum.to_floats(sums)}


def _recorded_call(fn, args, kwargs):
    """One call of a `runs` request, traced like a gated call (ops, launches, program); its
    trace is kept in _retained_programs until the grader asks for it or the next request."""
    extras: dict = {}
    with tracing.trace(extras, None, call_inputs.built_inputs(), _program, describe=False):
        out = fn(*args, **kwargs)
        if _program[0] is not None:
            _program[0].set_outputs(out)
    extras["tuple"] = isinstance(out, (tuple, list))
    _retained_programs.append(extras)
    return out


def _is_array(a) -> bool:
    return isinstance(a, np.ndarray) or type(a).__name__ == "Tensor"


# tracemalloc's C functions, bound before student code runs: patching tracemalloc's module
# attributes later changes nothing here
_TM_START, _TM_STOP, _TM_RESET = _tracemalloc.start, _tracemalloc.stop, _tracemalloc.reset_peak
_TM_TRACING, _TM_TRACED = _tracemalloc.is_tracing, _tracemalloc.get_traced_memory
_TM_TRACEBACK = _tracemalloc.get_object_traceback


@contextlib.contextmanager
def _tracemalloc_peak(extras: dict):
    """extras["peak_bytes"]: tracemalloc's peak over the call, above what was traced at its start.
    Stopping tracing (stop() ... start()) or clearing it drops every trace, so a sentinel block
    allocated after the start loses its own: extras["tracemalloc_tampered"] says what was seen.
    Both are words for a failure's message only: this runs beside student code (which can also
    reset_peak() or rebind these globals), so every memory verdict rests on the count from
    outside the worker (grader/sandbox/memory.py; docs/SECURITY.md)."""
    _TM_START()
    _TM_RESET()
    sentinel = bytearray(64)   # traced from here: its trace goes if tracing is stopped or cleared
    base = _TM_TRACED()[0]
    try:
        yield
    finally:
        tracing = _TM_TRACING()
        peak = _TM_TRACED()[1]
        if not tracing:
            extras["tracemalloc_tampered"] = "tracing was stopped during the call"
        elif _TM_TRACEBACK(sentinel) is None:
            extras["tracemalloc_tampered"] = ("tracing was stopped and restarted, or cleared, "
                                              "during the call")
        extras["peak_bytes"] = peak - base
        _TM_STOP()


try:
    _MALLOC_TRIM = ctypes.CDLL(None).malloc_trim   # glibc's, bound before student code runs
except (OSError, AttributeError):
    _MALLOC_TRIM = None                            # not glibc: nothing to trim


def _trim_heap() -> None:
    """Hand the C heap's free memory back to the OS (glibc's malloc_trim; a fraction of a ms)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


@contextlib.contextmanager
def _poison_empty():
    import torch
    import torch.utils.deterministic as deterministic

    saved = (torch.are_deterministic_algorithms_enabled(),
             torch.is_deterministic_algorithms_warn_only_enabled(),
             deterministic.fill_uninitialized_memory)
    # warn_only: ops without a deterministic version still run (with a warning), they do not raise
    _deterministic(torch, True, warn_only=True)
    deterministic.fill_uninitialized_memory = True
    try:
        yield
    finally:
        _deterministic(torch, saved[0], warn_only=saved[1])
        deterministic.fill_uninitialized_memory = saved[2]


def _deterministic(torch, mode: bool, warn_only: bool) -> None:
    """torch.use_deterministic_algorithms without its `import torch._inductor.config`, which
    loads dynamo, sympy and fx (about 2 s of CPU in every worker's first call): ATen's switch, the
    one that makes torch.empty fill with NaN, and inductor's flag only where inductor is loaded."""
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:   # another torch: the public call, import and all
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
        return
    setter(mode, warn_only=warn_only)
    inductor = sys.modules.get("torch._inductor.config")
    if inductor is not None:
        inductor.deterministic = mode


@contextlib.contextmanager
def trace(extras: dict, target: dict | None = None, record: bool = False):
    """grader.worker.tracing.trace for the call being run: with `record`, its program is made
    from the inputs built for it and kept in _program while it runs."""
    with tracing.trace(extras, target, call_inputs.built_inputs() if record else None, _program):
        yield
