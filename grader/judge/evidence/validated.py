"""Whether a gated call's recorded PROGRAM can be credited, before anything is replayed.

The program (grader.worker.program) was recorded in the student's process, so nothing in it is
trusted: it must be small (MAX_STEPS, MAX_LAUNCHES); run in the wrapper only the ops the check
allows (grader.judge.evidence.kernel_use.ALLOWED_OPS and the exercise's extra_ops); read only
tensors that are call inputs or that earlier steps made, never one of unknown origin; launch
only the kernels of the submission's file (grader.judge.evidence.kernel_source); and carry
little scalar information per call (SCALARS), so the answer cannot ride in launch arguments.
grader.judge.evidence.provenance replays what passes.
"""

from __future__ import annotations

from grader.judge.evidence import kernel_source
from grader.judge.evidence.replayed import refused as _fail

MAX_STEPS = 4096
MAX_LAUNCHES = 256
# scalar information per call: distinct values among launch scalars, constexprs, grids and
# fill values. Honest wrappers pass a scale, sizes, strides and block sizes: a few of each.
SCALARS = {"float": 16, "int": 64, "str": 8}
MAX_STR = 32
# the most information the launch scalars of one valid call can carry: 64 bits a number, 21 a
# character (grader.judge.evidence.moved_inputs.wanted: an output this small gets the second replay every time)
CAPACITY_BITS = 64 * (SCALARS["float"] + SCALARS["int"]) + 21 * MAX_STR * SCALARS["str"]
FILL_OPS = frozenset({"full", "full_like", "new_full", "fill_"})


def validate(program, call: str, allowed: frozenset, kernels: kernel_source.Filtered) -> dict:
    """Raise CheckFailed unless the program can be credited; return what its launches carry:
    {"launches": n, "float": {...}, "int": {...}, "str": {...}} (the distinct scalars)."""
    if not isinstance(program, dict) or not isinstance(program.get("steps"), list):
        raise _fail(call, "the grader got no record of the call's kernel launches (the trace was "
                          "switched off or replaced), so no answer can be credited")
    if program.get("overflow"):
        raise _fail(call, f"the call made {program['overflow']}; a wrapper allocates and "
                          f"launches a few kernels")
    steps = program["steps"]
    if len(steps) > MAX_STEPS:
        raise _fail(call, f"{len(steps)} steps recorded, more than {MAX_STEPS}")
    unknown = {int(u.get("sid", -1)): str(u.get("where", "")) for u in program.get("unknown", [])}
    known = {int(sid) for sid, _ in program.get("inputs", [])}
    numbers = {kind: set() for kind in SCALARS}
    launches = 0
    for n, step in enumerate(steps):
        if "launch" in step:
            launches += 1
            _check_launch(step, call, kernels, numbers)
        else:
            _check_op(step, call, allowed, numbers)
        for sid in _sids(step.get("args")) | _sids(step.get("kwargs")):
            if sid not in known:
                raise _fail(call, _unknown_message(sid, unknown, step))
        known |= _sids(step.get("out"))
    if launches == 0:
        raise _fail(call, "no Triton launch was recorded")
    if launches > MAX_LAUNCHES:
        raise _fail(call, f"{launches} launches in one call, more than {MAX_LAUNCHES}")
    for kind, limit in SCALARS.items():
        if len(numbers[kind]) > limit:
            raise _fail(call, f"its launches and fills carry {len(numbers[kind])} distinct "
                              f"{kind} values, more than {limit}: an answer cannot travel in "
                              f"launch arguments")
    for ref in program.get("outputs", []):
        sid = _sids(ref)
        if not sid or not sid <= known:
            raise _fail(call, "the returned tensor was not made by the call's recorded steps ("
                              "computed outside the kernels: in NumPy, a thread, or with the "
                              "trace switched off)")
    return {"launches": launches, **numbers}


def _unknown_message(sid: int, unknown: dict, step: dict) -> str:
    where = unknown.get(sid) or (f"launch of {step['launch']}" if "launch" in step else step.get("op"))
    return (f"{where} used a tensor that is neither an input of the call nor made by its "
            f"recorded steps (computed in NumPy, in a thread, before the call, or with the "
            f"trace switched off)")


def _check_op(step: dict, call: str, allowed: frozenset, numbers: dict) -> None:
    name = str(step.get("op", ""))
    parts = name.split(".")
    if len(parts) != 3 or parts[0] != "aten" or parts[1] not in allowed:
        raise _fail(call, f"torch op {name} ran in the wrapper: only allocations, views and "
                          f"copies may run there")
    _plain(step.get("args"), call, name)
    _plain(step.get("kwargs"), call, name)
    if parts[1].rstrip("_") in {f.rstrip("_") for f in FILL_OPS}:
        _count(step.get("args"), numbers, refs=False)


def _check_launch(step: dict, call: str, kernels: kernel_source.Filtered, numbers: dict) -> None:
    name = str(step.get("launch"))
    if "error" in step:
        raise _fail(call, f"the launch of {name} could not be recorded: {step['error']}")
    if name not in kernels.kernels:
        raise _fail(call, f"{name} was launched, which is not a module-level @triton.jit "
                          f"function of the exercise's file")
    if name in kernels.refused:
        raise _fail(call, f"the body of {name} is not Triton: {kernels.refused[name]}. Under "
                          f"the interpreter a kernel runs as Python, but it must compile")
    grid = step.get("grid")
    if not (isinstance(grid, list) and len(grid) == 3 and all(isinstance(g, int) for g in grid)):
        raise _fail(call, f"the grid of {name} could not be resolved to three integers")
    _plain(step.get("args"), call, name)
    _plain(step.get("options"), call, name)
    _count(step.get("args"), numbers)
    _count(grid, numbers)


def _plain(v, call: str, where: str, depth: int = 0) -> None:
    """Only ints, floats, bools, None, short strings, tensor refs and torch enums; lists short."""
    if v is None or isinstance(v, (bool, int, float)):
        return
    if isinstance(v, str):
        if len(v) > MAX_STR:
            raise _fail(call, f"{where} got a string of {len(v)} characters")
        return
    if isinstance(v, (list, tuple)):
        if len(v) > 16 or depth > 2:
            raise _fail(call, f"{where} got a sequence of {len(v)} values")
        for x in v:
            _plain(x, call, where, depth + 1)
        return
    if isinstance(v, dict):
        if "?" in v:
            raise _fail(call, f"{where} got a {v['?']}, which the grader cannot replay")
        if "t" in v or set(v) <= {"dtype", "device", "layout", "memory_format"}:
            return   # a tensor ref (its storage is checked apart) or a torch enum
        if set(v) == {"desc"} and isinstance(v["desc"], dict):   # a TensorDescriptor
            for x in v["desc"].values():
                _plain(x, call, where, depth + 1)
            return
        if depth == 0:
            for x in v.values():
                _plain(x, call, where, depth + 1)
            return
    raise _fail(call, f"{where} got a value the grader cannot replay")


def _count(v, numbers: dict, refs: bool = True) -> None:
    if isinstance(v, bool) or v is None:
        return
    if isinstance(v, int):
        numbers["int"].add(v)
    elif isinstance(v, float):
        numbers["float"].add(v)
    elif isinstance(v, str):
        numbers["str"].add(v)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _count(x, numbers, refs)
    elif isinstance(v, dict) and "t" not in v:
        for x in v.values():
            _count(x, numbers, refs)


def _sids(v) -> set:
    if isinstance(v, dict):
        if "t" in v and isinstance(v["t"], (list, tuple)) and v["t"]:
            return {int(v["t"][0])}
        return set().union(*(_sids(x) for x in v.values())) if v else set()
    if isinstance(v, (list, tuple)):
        return set().union(*(_sids(x) for x in v)) if v else set()
    return set()
