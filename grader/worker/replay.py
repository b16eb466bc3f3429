"""The replay worker's half of provenance: run a gated call's program again, on its inputs rebuilt.

The replay worker is an ordinary worker (same launcher, sandbox and mode) whose sources folder
holds an AST-filtered copy of the submission, made by the trusted side
(grader.judge.evidence.provenance): imports, @triton.jit functions without their other decorators, and
literal module constants. No other student code exists in this process. A `replay` request
carries the original call's input markers (built here exactly as there, guard and padding
included) and its program (grader.worker.program); this module

  1. checks that every launched kernel compiles with Triton's own front end (ASTSource →
     make_ir for a CUDA target: under the interpreter a kernel body is plain Python, and one
     that calls torch or NumPy raises CompilationError here);
  2. runs the steps: allowed torch ops through torch.ops.aten, launches through the filtered
     module's kernels, every `empty` NaN-filled (the trusted side turns that on), so an output
     element no kernel wrote cannot match what the call returned;
  3. returns the output refs' tensors, which the trusted side compares with the call's answer.
"""

from __future__ import annotations

import importlib

from grader.wire import checksum

_compile_cache: dict = {}   # (kernel, signature, constexprs) -> error text ("" = compiles)


class FrontEndUnavailable(Exception):
    """This Triton has not the front-end entry points the check uses: the grader's problem."""


def run(module, program: dict, inputs: list, mode: str, check: bool = True,
        execute: bool = True, summed: dict | None = None) -> dict:
    """{"outputs": [tensor ...], "compile": [{kernel, error}], "error": str}: the program's
    outputs as replayed (a failing step stops the replay and says which). `check`: compile
    each launched kernel first; `execute`: then run the steps. Under the interpreter the
    front end cannot run (Triton's own @jit library functions are interpreted there too), so
    the trusted side asks a worker of mode "cpu" (no interpreter, no GPU) for the check and the
    interp worker for the steps; on CUDA one worker does both.

    `summed` {"weights": seed, "tuple": bool} (a timed call of the perf layer): instead of the
    outputs, "sum": their checksum as the timed call's was taken (grader.wire.checksum, the
    same weights, the same device, the tensors as the steps left them), so no output crosses;
    on CUDA also "peak_bytes", the most memory the steps held at once beyond the inputs (the
    caching allocator's peak in this process, where no host code of the student's runs: the
    memory checks' evidence)."""
    import torch

    if check:
        problems = compile_check(module, [s for s in program["steps"] if "launch" in s], mode)
        if problems or not execute:
            return {"outputs": [], "compile": problems, "error": ""}
    storages = {int(sid): inputs[int(i)].untyped_storage() for sid, i in program["inputs"]}
    counted = mode == "cuda" and summed is not None
    if counted:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    for n, step in enumerate(program["steps"]):
        try:
            if "launch" in step:
                _launch(module, step, storages)
            else:
                _op(torch, step, storages)
        except Exception as e:  # noqa: BLE001 - the replay of a student's step
            what = step.get("launch") or step.get("op")
            return {"outputs": [], "compile": [], "error": f"step {n + 1} ({what}) failed on "
                                                           f"replay: {type(e).__name__}: {e}"[:600]}
    peak = {}
    if mode == "cuda":
        torch.cuda.synchronize()
    if counted:
        peak["peak_bytes"] = int(torch.cuda.max_memory_allocated() - base)
    outputs = [_tensor(torch, r, storages) for r in program["outputs"]]
    if summed is not None:
        value = tuple(outputs) if summed.get("tuple") else (outputs[0] if outputs else None)
        weights = checksum.checksum_weights(value, int(summed["weights"]))
        total = checksum.to_floats([checksum.checksum(value, weights)])[0]
        return {"outputs": [], "sum": total, "compile": [], "error": "", **peak}
    return {"outputs": [t.clone() for t in outputs], "compile": [], "error": "", **peak}


def module_named(module, name):
    """The filtered module a request is for: the one this worker loaded, or another exercise
    file of the same filtered folder (one compile worker serves every exercise of a run)."""
    if not name or name == getattr(module, "__name__", None):
        return module
    if not (isinstance(name, str) and name.isidentifier()):
        raise ValueError(f"not a module name: {name!r:.80}")
    return importlib.import_module(name)


def _tensor(torch, ref: dict, storages: dict):
    sid, offset, shape, stride, dtype = ref["t"]
    storage = storages[int(sid)]
    t = torch.empty(0, dtype=getattr(torch, dtype), device=storage.device)
    return t.set_(storage, int(offset), tuple(shape), tuple(stride))


def _value(torch, v, storages: dict):
    if isinstance(v, list):
        return [_value(torch, x, storages) for x in v]
    if isinstance(v, tuple):
        return tuple(_value(torch, x, storages) for x in v)
    if isinstance(v, dict):
        if "t" in v:
            return _tensor(torch, v, storages)
        if "dtype" in v:
            return getattr(torch, v["dtype"])
        if "device" in v:
            return torch.device(v["device"])
        if "layout" in v:
            return getattr(torch, v["layout"])
        if "memory_format" in v:
            return getattr(torch, v["memory_format"])
        if "desc" in v:
            from triton.tools.tensor_descriptor import TensorDescriptor

            fields = {k: _value(torch, x, storages) for k, x in v["desc"].items()}
            return TensorDescriptor(**fields)
        raise ValueError(f"a value the replay cannot rebuild: {v}")
    return v


def _op(torch, step: dict, storages: dict) -> None:
    namespace, name, overload = step["op"].split(".")
    if namespace != "aten":
        raise ValueError(f"not an aten op: {step['op']}")
    func = getattr(getattr(torch.ops.aten, name), overload)
    out = func(*_value(torch, step["args"], storages), **{k: _value(torch, v, storages)
                                                          for k, v in step["kwargs"].items()})
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    tensors = [t for t in outs if type(t).__name__ == "Tensor"]
    for ref, t in zip(step["out"], tensors):
        storages.setdefault(int(ref["t"][0]), t.untyped_storage())


def _launch(module, step: dict, storages: dict) -> None:
    import torch

    kernel = _kernel(module, step["launch"])
    args = {k: _value(torch, v, storages) for k, v in step["args"].items()}
    options = {k: _value(torch, v, storages) for k, v in step["options"].items()}
    kernel.run(grid=tuple(step["grid"]), warmup=False, **args, **options)


def _kernel(module, name: str):
    kernel = getattr(module, name, None)
    if kernel is None or not hasattr(kernel, "run") or not hasattr(kernel, "fn"):
        raise ValueError(f"{name} is not a @triton.jit function of the submission's file")
    return kernel


# ------------------------------------------------------------------------------ front end


def compile_check(module, launches: list, mode: str) -> list:
    """[{kernel, error}] for each launched kernel Triton's front end refuses, with the
    signature and constexprs of its launch (a worker without the interpreter: JITFunctions)."""
    problems = []
    try:
        for step in launches:
            _check_one(module, step, mode, problems)
    except FrontEndUnavailable:
        if mode == "cuda":   # redundant there: the kernels are compiled for real when they run
            return []
        raise
    return problems


def _check_one(compiled, step: dict, mode: str, problems: list) -> None:
    """Append {kernel, error} when the launch's kernel does not compile (cached per signature)."""
    name = str(step.get("launch"))
    if "error" in step:
        problems.append({"kernel": name, "error": step["error"]})
        return
    try:
        fn = _kernel(compiled, name)
        signature, constexprs = _signature(fn, step["args"])
    except (ValueError, KeyError, TypeError) as e:
        problems.append({"kernel": name, "error": str(e)[:600]})
        return
    key = (name, tuple(sorted(signature.items())), repr(sorted(constexprs.items())))
    if key not in _compile_cache:
        _compile_cache[key] = _make_ir(fn, signature, constexprs, mode)
    if _compile_cache[key]:
        problems.append({"kernel": name, "error": _compile_cache[key]})


def _signature(fn, args: dict) -> tuple[dict, dict]:
    """The launch's signature as Triton's launcher would specialise it (triton's mangle_type of
    a stand-in for each argument: an empty tensor of the recorded dtype, a descriptor over one,
    the scalar itself), constexprs by position."""
    import torch

    try:
        from triton.runtime.jit import mangle_type
    except ImportError as e:
        raise FrontEndUnavailable(f"triton.runtime.jit.mangle_type: {e}") from None

    signature, constexprs = {}, {}
    for p in fn.params:
        v = args[p.name]
        if p.is_constexpr or v is None or isinstance(v, str) or (isinstance(v, dict) and "dtype" in v):
            signature[p.name] = "constexpr"
            constexprs[(p.num,)] = _constexpr(v)
            continue
        signature[p.name] = mangle_type(_stand_in(torch, v))
    return signature, constexprs


def _constexpr(v):
    if isinstance(v, dict) and "dtype" in v:
        import triton.language as tl

        return getattr(tl, "int1" if v["dtype"] == "bool" else v["dtype"])
    return v


def _stand_in(torch, v):
    """An argument with the recorded argument's type: an empty tensor of its dtype for a ref,
    a descriptor over a 16-byte aligned one for a descriptor, the value itself otherwise."""
    if isinstance(v, dict) and "t" in v:
        return torch.empty(0, dtype=getattr(torch, v["t"][4]))
    if isinstance(v, dict) and "desc" in v:
        from triton.tools.tensor_descriptor import TensorDescriptor

        d = dict(v["desc"])
        base = torch.empty(64, dtype=getattr(torch, d.pop("base")["t"][4]))
        return TensorDescriptor(base, **d)
    return v


def _make_ir(fn, signature: dict, constexprs: dict, mode: str) -> str:
    """"" when Triton's front end turns the kernel into IR, else the compiler's message."""
    try:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from triton.compiler.compiler import make_backend
        from triton._C.libtriton import ir

        target = GPUTarget("cuda", 90, 32)
        if mode == "cuda":
            import triton

            target = triton.runtime.driver.active.get_current_target()
        backend = make_backend(target)
        options = backend.parse_options({})
        ctx = ir.context()
        ir.load_dialects(ctx)
        backend.load_dialects(ctx)
        codegen, modules = backend.get_codegen_implementation(options), backend.get_module_map()
    except Exception as e:  # noqa: BLE001 - another Triton release: ImportError, AttributeError ...
        raise FrontEndUnavailable(f"{type(e).__name__}: {e}") from None
    try:
        ASTSource(fn, signature, constexprs).make_ir(target, options, codegen, modules, ctx)
    except Exception as e:  # noqa: BLE001 - CompilationError and whatever the front end raises
        return f"{type(e).__name__}: {e}"[:1500]
    return ""
