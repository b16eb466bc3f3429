"""Worker side: what each Triton kernel launched in a traced call was compiled to.

For every launch (`JITFunction.run`, wrapped by tracing._count_triton_launches) `describe` reads
the CompiledKernel that Triton returned for THIS device: the kernel's name, num_warps,
num_stages, its constexpr arguments (BLOCK_M, ...), `metadata.shared` (bytes of shared memory
per block) and, once the kernel has run, `n_regs` and `n_spills`. Asked for a target
(`opts["target"] = {"arch": 121, "warp_size": 32, "fallback": [120, 80]}`), it also compiles the
same kernel with the same arguments for that target, without launching it, and records the
target's `metadata.shared`. Shared memory is fixed before ptxas runs, so when the installed ptxas
does not know the target's arch the next arch of `fallback` is tried (sm_120 and sm_80 share
sm_121's mma path and its shared memory figures: docs/SPARK.md); the record says which arch
answered.

Nothing here may change the student's launch or raise into the student's call: every failure
becomes data ({"error": ...}). These numbers come from the worker, next to student code, so the
trusted side treats them as advice (grader/judge/machine/target.py), never as points.
"""

from __future__ import annotations

import contextlib
import os
import warnings

MAX_RECORDS = 64        # distinct kernel specialisations recorded per call
_target_cache: dict = {}   # (hash of this device's kernel, archs) -> the target's record


def describe(jitfn, args: tuple, kwargs: dict, kernel, target: dict | None, run,
             autotuned: bool = False) -> dict | None:
    """The record of one launch; None when `kernel` is not a compiled kernel (the interpreter,
    a cache hook that compiled nothing). `run` is Triton's own JITFunction.run (not the probe's
    wrapper), used to compile for the target."""
    try:
        meta = getattr(kernel, "metadata", None)
        if meta is None:
            return None
        rec = {"name": _name(jitfn, kernel),
               "num_warps": _int(getattr(meta, "num_warps", None)),
               "num_stages": _int(getattr(meta, "num_stages", None)),
               "constexprs": constexprs(jitfn, args, kwargs),
               "arch": _int(getattr(getattr(meta, "target", None), "arch", None)),
               "shared": _int(getattr(meta, "shared", None))}
        # set when the kernel's handles were loaded, i.e. after its first launch on this device
        for attr in ("n_regs", "n_spills"):
            value = _int(kernel.__dict__.get(attr)) if hasattr(kernel, "__dict__") else None
            if value is not None:
                rec[attr] = value
        if autotuned:
            rec["autotuned"] = True
        if target:
            rec["target"] = for_target(jitfn, args, kwargs, kernel, rec, target, run)
        return rec
    except Exception as e:  # noqa: BLE001 - evidence only: never into the student's call
        return {"name": _name(jitfn, kernel), "error": _short(e)}


def for_target(jitfn, args, kwargs, kernel, rec: dict, target: dict, run) -> dict:
    """{"arch_asked", "arch", "shared"} of the kernel compiled for the target, or with "error"."""
    try:
        archs = [int(target["arch"])] + [int(a) for a in target.get("fallback") or ()]
        warp_size = int(target.get("warp_size") or 32)
    except (KeyError, TypeError, ValueError) as e:
        return {"error": f"bad target {str(target)[:80]}: {_short(e)}"}
    if not all(80 <= a < 1000 for a in archs) or not 0 < warp_size <= 64:
        # Triton's NVIDIA backend starts at sm_80 here; LLVM aborts the process on some others
        return {"error": f"not compiled: target {archs} outside sm_80 .. sm_999"}
    key = (getattr(kernel, "hash", None) or id(kernel), tuple(archs), warp_size)
    if key in _target_cache:
        return dict(_target_cache[key])
    if rec.get("arch") == archs[0] and rec.get("shared") is not None:
        out = {"arch_asked": archs[0], "arch": archs[0], "shared": rec["shared"]}   # same chip
    else:
        errors = []
        out = None
        for arch in archs:
            try:
                compiled = compile_for(jitfn, args, kwargs, arch, warp_size, run)
                shared = _int(getattr(getattr(compiled, "metadata", None), "shared", None))
                if shared is None:
                    raise RuntimeError("the compiled kernel has no metadata.shared")
                out = {"arch_asked": archs[0], "arch": arch, "shared": shared}
                break
            except Exception as e:  # noqa: BLE001 - e.g. this ptxas does not know the arch
                errors.append(f"sm_{arch}: {_short(e)}")
        if out is None:
            out = {"arch_asked": archs[0], "error": "; ".join(errors)[:600]}
        elif errors:
            out["tried"] = "; ".join(errors)[:600]
    _target_cache[key] = out
    return dict(out)


def compile_for(jitfn, args, kwargs, arch: int, warp_size: int, run):
    """Compile `jitfn` with these arguments for GPUTarget("cuda", arch, warp_size); no launch.

    Triton picks the target when it makes a kernel's binder (driver.active.get_current_target,
    read once per device into jitfn.device_caches): for the length of one `run(warmup=True)` the
    driver answers the target and the function gets empty caches, then both are put back."""
    from collections import defaultdict

    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver

    active = driver.active
    own = "get_current_target" in getattr(active, "__dict__", {})
    previous = getattr(active, "get_current_target")
    caches = jitfn.device_caches
    kw = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
    with _quiet():
        try:
            active.get_current_target = lambda: GPUTarget("cuda", arch, warp_size)
            jitfn.device_caches = defaultdict(jitfn.create_binder)
            return run(jitfn, *args, grid=(1,), warmup=True, **kw)
        finally:
            jitfn.device_caches = caches
            if own:
                active.get_current_target = previous
            else:
                try:
                    del active.get_current_target
                except AttributeError:
                    active.get_current_target = previous


def constexprs(jitfn, args, kwargs) -> dict:
    """The kernel's tl.constexpr arguments as launched (defaults filled in), JSON-plain."""
    out = {}
    params = list(getattr(jitfn, "params", None) or ())
    names = [getattr(p, "name", None) for p in params]
    values = dict(zip(names, args))
    values.update({k: v for k, v in kwargs.items() if k in names})
    for p in params:
        if not getattr(p, "is_constexpr", False):
            continue
        name = getattr(p, "name", None)
        if name in values:
            out[str(name)] = _plain(values[name])
        else:
            default = getattr(p, "default", None)
            if default is not None and "empty" not in type(default).__name__:
                out[str(name)] = _plain(default)
    return dict(list(out.items())[:24])


@contextlib.contextmanager
def _quiet():
    """No torch dispatch mode (the trace's op recorder), no warning and no compiler diagnostic
    printed into the student's captured output while the target compile runs."""
    stack = contextlib.ExitStack()
    with contextlib.suppress(Exception):
        from torch.utils._python_dispatch import _disable_current_modes

        stack.enter_context(_disable_current_modes())
    saved = []
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        saved = [os.dup(1), os.dup(2)]
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
    try:
        with stack, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for fd, saved_fd in zip((1, 2), saved):
            os.dup2(saved_fd, fd)
            os.close(saved_fd)


def _name(jitfn, kernel) -> str:
    fn = getattr(jitfn, "fn", None)
    name = getattr(fn, "__name__", None) or getattr(kernel, "name", None) or "?"
    return str(name)[:120]


def _int(v):
    return int(v) if type(v) is int and 0 <= v < 1 << 53 else None


def _plain(v):
    """A constexpr value the codec carries as it is: bool, a small int, a finite float, None;
    anything else as a short string (never a value that would make the reply fail to encode)."""
    value = getattr(v, "value", v)   # tl.constexpr(8) -> 8
    if value is None or type(value) is bool:
        return value
    if type(value) is int:
        return value if abs(value) < 1 << 53 else str(value)[:60]
    if type(value) is float:
        return value if value == value and abs(value) != float("inf") else str(value)
    try:
        return str.__str__(str(v))[:60]
    except Exception:  # noqa: BLE001 - a __str__ that raises
        return "?"


def _short(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return " ".join(text.split())[:300]
