"""What ran during one student call, recorded in the worker (grader.worker.probes asks): the aten
ops below the dispatcher, the Triton launches (counted, described from what they compiled to,
and with a program recorder, each one's arguments: grader.worker.program), and on CUDA every
device kernel of the process (torch.profiler). Evidence only: the trusted side judges it
(grader.judge.evidence.kernel_use) and replays the program (grader.judge.evidence.provenance)."""

from __future__ import annotations

import contextlib
import functools

from grader.worker import program, resources   # imported before any student code runs


@functools.lru_cache(maxsize=1)
def dispatch_mode():
    """torch's TorchDispatchMode, subclassed so that a mode's first op does not import
    torch._dynamo: TorchDispatchMode wraps a subclass's __torch_dispatch__ in
    torch._disable_dynamo unless _should_skip_dynamo() is False, and that wrapper's first call
    imports dynamo, sympy and fx (about 2 s of CPU in each worker). Nothing a worker runs is
    compiled by dynamo, so there is nothing to skip."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Mode(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False

    return Mode


@contextlib.contextmanager
def trace(extras: dict, target: dict | None = None, inputs: list | None = None,
          current: list | None = None, describe: bool = True):
    """Record the aten ops that ran, count Triton kernel launches and describe what each
    launched kernel compiled to (for this device, and for `target` if asked; not with
    `describe` False: the perf layer's timed calls). Given the call's `inputs`, also the call's
    program → extras["program"] (grader.worker.program: ops and launches), held in current[0]
    while the call runs."""
    ops: list[str] = []
    launches = [0]
    names: list[str] = []
    compiled: dict = {}
    prog = program.Program(inputs) if inputs is not None else None
    current = current if current is not None else [None]
    inside = [0]   # > 0 while a launch (or an autotuner's benchmark) runs

    current[0] = prog
    try:
        with _count_triton_launches(launches, names, compiled if describe else None, target,
                                    prog, inside), _recorder()(ops, prog, inside):
            yield
    finally:
        current[0] = None
        if compiled:   # nothing under the interpreter: no kernel is compiled there
            extras["compiled"] = list(compiled.values())
        if prog is not None:
            extras["program"] = prog.record()
    extras["ops"] = sorted(set(ops))
    extras["launches"] = launches[0]
    extras["triton_kernels"] = sorted(set(names))


@functools.lru_cache(maxsize=1)
def _recorder():
    """The dispatch mode that lists a call's aten ops (and, with a program, records each op
    outside a launch as a step): one class, made once (a class per call cost as much as the
    rest of a timed call's recording)."""
    class Recorder(dispatch_mode()):
        def __init__(self, ops: list, prog, inside: list):
            super().__init__()
            self.ops, self.prog, self.inside = ops, prog, inside

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = str(func.overloadpacket.__name__)
            # a copy between the GPU and the host inside a wrapper is the way to compute with
            # NumPy behind a dummy launch: it gets its own name, which no check allows
            if name in ("_to_copy", "copy_") and _crosses_devices(args, out):
                name = "copy_between_devices"
            self.ops.append(name)
            if self.prog is not None and not self.inside[0]:
                self.prog.op(func, args, kwargs, out)
            return out

    return Recorder


def _crosses_devices(args, out) -> bool:
    devices = {str(t.device.type) for t in (*args, out) if type(t).__name__ == "Tensor"}
    return len(devices) > 1


@contextlib.contextmanager
def _count_triton_launches(counter: list, names: list, compiled: dict | None, target: dict | None,
                           prog, inside: list):
    """Wrap Triton's launch entry points (compiled and interpreted) to count launches; with
    `compiled` (None: describe nothing), describe each compiled launch there
    (resources.describe), one record per kernel specialisation, marked `autotuned` when an
    autotuner made the launch (it benchmarks every config, and on another chip would skip one
    that does not fit rather than fail). With `prog`, every launch outside an autotuner's benchmark is a step of the program; `inside` counts the
    launches and benchmarks running (their torch ops are not steps)."""
    patched = []
    autotuning = [0]
    try:
        import triton.runtime.jit as jit
        import triton.runtime.interpreter as interp

        for owner, attr in ((jit.JITFunction, "run"), (interp.InterpretedFunction, "run")):
            original = getattr(owner, attr, None)
            if original is None:
                continue
            describe = compiled is not None and owner is jit.JITFunction

            def counting(self, *a, __original=original, __describe=describe, **kw):
                counter[0] += 1
                names.append(str(getattr(getattr(self, "fn", None), "__name__", "?")))
                if prog is not None and not inside[0]:
                    prog.launch(self, a, kw)
                inside[0] += 1
                try:
                    kernel = __original(self, *a, **kw)
                finally:
                    inside[0] -= 1
                if __describe and len(compiled) < resources.MAX_RECORDS:
                    key = (id(self), getattr(kernel, "hash", None) or id(kernel), bool(autotuning[0]))
                    if key not in compiled:
                        rec = resources.describe(self, a, kw, kernel, target, __original,
                                                 autotuned=bool(autotuning[0]))
                        if rec is not None:
                            compiled[key] = rec
                return kernel

            setattr(owner, attr, counting)
            patched.append((owner, attr, original))
        with contextlib.suppress(ImportError):
            from triton.runtime import autotuner

            # the autotuner's launches are marked; its benchmark's launches and ops are
            # not the answer's (the chosen config's launch is)
            _around(autotuner.Autotuner, "run", autotuning, patched)
            _around(autotuner.Autotuner, "_bench", inside, patched)
    except ImportError:
        pass
    try:
        yield
    finally:
        for owner, attr, original in patched:
            setattr(owner, attr, original)


def _around(owner, attr: str, depth: list, patched: list) -> None:
    """Wrap owner.attr so that depth[0] counts the calls in progress (restored from `patched`)."""
    original = getattr(owner, attr, None)
    if original is None:
        return

    def wrapped(self, *a, __original=original, **kw):
        depth[0] += 1
        try:
            return __original(self, *a, **kw)
        finally:
            depth[0] -= 1

    setattr(owner, attr, wrapped)
    patched.append((owner, attr, original))


@contextlib.contextmanager
def cuda_kernels(extras: dict):
    """Record every device kernel of the call with torch.profiler (CUPTI sees all threads of the
    process, not just the caller's); synchronize first and last so nothing queued escapes."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        try:
            yield
        finally:
            torch.cuda.synchronize()
    kernels = []
    for e in prof.events():
        device_type = str(getattr(e, "device_type", ""))
        if device_type.endswith("CUDA") and getattr(e, "name", ""):
            kernels.append(str(e.name))
    extras["kernels"] = sorted(set(kernels))
