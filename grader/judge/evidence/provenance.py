"""Every answer of a Triton exercise is judged by where it came from: REPLAY.

The kernel-use trace (grader.judge.evidence.kernel_use) lives in the student's process and can be
switched off; this check does not need the recording to be honest. Every gated call records its
PROGRAM in the worker (grader.worker.program: each storage it touched, each allowed torch op
and each Triton launch with its arguments, grid and constexprs as the launch used them). Here:

  1. validate it (grader.judge.evidence.validated): bounded size; only ALLOWED_OPS (and the
     exercise's extra_ops); every tensor a step reads is a call input, a storage an earlier
     step made, never one of unknown origin; only kernels of the submission's file; little
     scalar information per call (SCALARS), so the answer cannot ride in launch arguments;
  2. replay it in a clean worker of the same mode (grader.worker.replay) that holds only the
     submission's @triton.jit functions (grader.judge.evidence.kernel_source): the inputs rebuilt from
     the same markers, each kernel first compiled by Triton's own front end;
  3. compare the replayed outputs with what the call returned: exactly (NaN equal to NaN: same
     kernels, same inputs, same device), or, when a kernel uses atomics, within ATOMIC_TOL
     (grader.judge.evidence.replayed, which also compares a timed call's checksum);
  4. replay it once more on fresh inputs of the same shapes (grader.judge.evidence.moved_inputs), where the
     exercise has a form for the call: the outputs must be the reference's of those inputs, so
     numbers computed from the call's values outside the kernels and passed to a launch give
     the old inputs' answer and fail.

A failure is CheckFailed that follows <exercise>.uses_kernel, like the kernel-use gate's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import contextlib
import threading

from grader.judge.evidence import moved_inputs, kernel_source
from grader.judge.evidence.frontend import compiled_before, remember_compiled
from grader.judge.answers.compare import CheckFailed
from grader.judge.evidence.replayed import TimedCall, compare, compare_sum, refused as _fail
from grader.judge.evidence.validated import CAPACITY_BITS, validate


@dataclass
class Call:
    """A gated call as provenance replays it: the replay worker (a grader.sandbox.proxy
    Submission importing `replay_sources(sources)`), the call's argument markers in the order
    the worker built them (positional, then keyword), its decoded value and its opts; under the
    interpreter `compiler`, a replay worker of mode "cpu" (no interpreter) that runs Triton's
    front end on the launched kernels (grader.worker.replay.run); `moved_inputs`, () -> the call's
    fresh inputs and their reference (grader.judge.evidence.moved_inputs.MovedInputs, or None where it has none)."""
    replayer: object
    sources: Path
    args: list
    value: object
    opts: dict
    compiler: object = None
    moved_inputs: object = None
    # records -> None, raising the check's own CheckFailed: the bounds verdict of a check that
    # owns the masks (kernel_use.assert_in_bounds), judged on the replay's record of every lane
    bounds_judge: object = None

    def replay(self, program: dict, opts: dict, module: str, kernels: kernel_source.Filtered,
               args: list | None = None):
        """The program's outputs replayed on the call's inputs, or on `args` (other markers of
        the same shapes); under the interpreter the front end judges each kernel first."""
        if self.compiler is not None:
            keys = {_compile_key(kernels, s) for s in program["steps"] if "launch" in s}
            if not all(compiled_before(k, self.replayer) for k in keys):
                problems = self.compiler.replay([], program, {}, module)
                if _low_memory():   # three workers of torch and Triton would not fit
                    self.compiler.close()
                if not isinstance(problems, dict) or problems.get("compile"):
                    return problems
                for k in keys:
                    remember_compiled(k, self.replayer)
        return self.replayer.replay(self.args if args is None else args, program, opts, module)


def _replay(replayed: Call, program: dict, opts: dict, exercise: str,
            kernels: kernel_source.Filtered, call: str, args: list | None = None):
    from grader import errors

    try:
        return replayed.replay(program, opts, exercise, kernels, args)
    except errors.StudentProblem as e:   # the filtered file or a step failed there
        where = "from the kernels alone" if args is None else "on moved inputs of the same shapes"
        raise _fail(call, f"its recorded launches could not be replayed {where}: "
                          f"{str(e)[:800]}") from None


def _compile_key(kernels: kernel_source.Filtered, step: dict) -> tuple:
    """What the front end's verdict depends on: the kernel's text, its constexprs' values and
    the types of its other arguments (as grader.worker.replay builds the signature)."""
    name = str(step.get("launch"))
    constexprs = kernels.constexprs.get(name, set())

    def kind(param, v):
        if param in constexprs or v is None or isinstance(v, str) or (isinstance(v, dict) and "dtype" in v):
            return ("constexpr", repr(v))
        if isinstance(v, dict) and "t" in v:
            return ("tensor", str(v["t"][4]))
        if isinstance(v, dict) and "desc" in v:
            return ("desc", repr(v["desc"].get("base", {}).get("t", [None] * 5)[4]),
                    repr(v["desc"].get("block_shape")), repr(v["desc"].get("padding")))
        if isinstance(v, bool) or not isinstance(v, int):
            return (type(v).__name__,)
        return ("int", -2**31 <= v < 2**31)

    args = step.get("args") if isinstance(step.get("args"), dict) else {}
    return (kernels.digest, name, tuple(sorted((k, kind(k, v)) for k, v in args.items())))


def _low_memory() -> bool:
    from grader.sandbox import budget

    return budget.one_exercise_at_a_time()


_MAKING = threading.Lock()   # the deferred perf checks settle in threads (grader.plugin)


def replay_sources(sources: Path) -> Path:
    """The filtered copy of a sources folder (next to it, made once): every exercise file
    reduced to imports, kernels and literal constants."""
    dest = Path(sources).parent / f"{Path(sources).name}-replay"
    with _MAKING:
        return dest if dest.is_dir() else _filtered_copy(sources, dest)


def _filtered_copy(sources: Path, dest: Path) -> Path:
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    for f in sorted(Path(sources).glob("*.py")):
        text, _ = kernel_source.filtered(f.read_text(errors="replace"))
        (tmp / f.name).write_text(text)
        (tmp / f.name).chmod(0o444)
    tmp.chmod(0o555)
    tmp.rename(dest)
    return dest


@contextlib.contextmanager
def replayers(sub):
    """(replay worker, compile worker or None) for one proxy Submission outside a Workers set
    (the sanitizer's): started on first use, stopped when the block ends."""
    from grader.sandbox import proxy

    filtered = replay_sources(sub.sources)
    base = Path(sub.scratch).parent
    made = [proxy.Submission(sub.exercise, sub.directory, sub.mode, base / "replay", filtered,
                             sub.level, cache="replay")]
    if sub.mode == "interp":
        made.append(proxy.Submission(sub.exercise, sub.directory, "cpu", base / "replay-compile",
                                     filtered, sub.level))
    try:
        yield made[0], (made[1] if len(made) > 1 else None)
    finally:
        for s in made:
            s.close()


def kernels_of(sources: Path, exercise: str) -> kernel_source.Filtered:
    path = Path(sources) / f"{exercise}.py"
    try:
        return kernel_source.filtered(path.read_text(errors="replace"))[1]
    except OSError:
        return kernel_source.Filtered()


def check(extras: dict, exercise: str, call: str, allowed: frozenset, replayed: Call,
          timed: TimedCall | None = None) -> None:
    """Validate the call's program, replay it and compare with the call's value; for a timed
    call (`timed`), compare the replay's checksum with the one the call sent back instead: to
    the last bit (same kernels, same inputs, same device; within `timed.tol` with atomics), so
    an answer that the recorded kernels did not compute differs even where it is right. Raises
    CheckFailed (follows <exercise>.uses_kernel).

    Under the interpreter (the call's opts asked for `bounds`) the replay is bounds-checked
    every time, whatever the call's own record said: that record was made in the student's
    process (a fake `bounds` module, a rewritten list), the replay's in a worker that runs no
    host code of the student's (grader.judge.evidence.kernel_source keeps only kernels, imports and
    literal constants, and every kernel passes Triton's front end first). Where the check owns
    the masks (`replayed.bounds_judge`, kernel_use.assert_in_bounds), its verdict is judged on
    the replay's record alone, and a replay that sends none back fails it."""
    own = None
    try:
        program = extras.get("program")
        kernels = kernels_of(replayed.sources, exercise)
        carried = validate(program, call, allowed, kernels)
        opts = {"bounds": bool(replayed.opts.get("bounds")), "poison_empty": True}
        if timed is not None:
            opts.update(refill=timed.refill, summed=timed.summed)
        got = _replay(replayed, program, opts, exercise, kernels, call)
        own = _bounds_verdict(replayed, got, call, kernels, exercise)   # the check's own failure
        if own is not None:
            raise own
        if timed is None:
            compare(got, replayed.value, call, kernels.atomics)
            form = (replayed.moved_inputs() if replayed.moved_inputs is not None
                    and moved_inputs.wanted(carried, replayed.value, CAPACITY_BITS) else None)
            # the same program on moved inputs (grader.judge.evidence.moved_inputs), bounds-checked only where
            # the replay's lanes went out of bounds (masked there as here)
            moved = {**opts, "bounds": opts["bounds"] and bool(_lanes_out(got))}
            if form is not None:
                moved_inputs.judge(form, lambda f: _replay(replayed, program, moved, exercise, kernels,
                                                    call, [*f.args, *f.kwargs.values()]),
                            replayed.moved_inputs, replayed.value, call)
        else:
            compare_sum(got, timed, call, kernels.atomics)
    except CheckFailed as e:
        if e is not own:
            e.follows = (f"{exercise}.uses_kernel",)
        raise


def _lanes_out(got) -> list:
    """The replay's record of lanes out of bounds (grader.worker.bounds), [] where none came."""
    record = got.get("bounds") if isinstance(got, dict) else None
    lanes = record.get("out_of_bounds") if isinstance(record, dict) else None
    return lanes if isinstance(lanes, list) else []


def _bounds_verdict(replayed: Call, got, call: str, kernels: kernel_source.Filtered,
                    exercise: str) -> CheckFailed | None:
    """The failure `replayed.bounds_judge` gives on the replay's record of every lane (None:
    in bounds, or no judge asked), its lines those of the submission's file. A replay that ran
    its steps and sent back no record fails (uses_kernel's failure: the evidence was missing);
    one that did not run them (a kernel the front end refused, a step that failed) is
    compare's to report."""
    ran = isinstance(got, dict) and not got.get("compile") and not got.get("error")
    if replayed.bounds_judge is None or not ran:
        return None
    record = got.get("bounds")
    if not isinstance(record, dict) or not isinstance(record.get("out_of_bounds"), list):
        raise _fail(call, "its replay sent back no record of which lanes its loads and stores "
                          "touched, so staying in bounds cannot be judged; the evidence was "
                          "missing, which is never a pass")
    try:
        replayed.bounds_judge(_student_lines(record["out_of_bounds"], kernels,
                                             Path(replayed.sources) / f"{exercise}.py"))
    except CheckFailed as e:
        return e
    return None


def _student_lines(records: list, kernels: kernel_source.Filtered, path: Path) -> list:
    """The replay's records of lanes out of bounds, each "line" ("<file>.py:<n>" of the
    filtered copy the replay worker ran) and "code" moved to the submission's own file
    (kernel_source.Filtered.lines)."""
    try:
        source = path.read_text(errors="replace").splitlines()
    except OSError:
        return records
    out = []
    for r in records:
        r = dict(r) if isinstance(r, dict) else r
        name, _, n = str(r.get("line", "")).rpartition(":") if isinstance(r, dict) else ("", "", "")
        line = kernels.lines.get(int(n)) if n.isdigit() else None
        if line is not None and line <= len(source):
            r["line"], r["code"] = f"{name}:{line}", source[line - 1].strip()
        out.append(r)
    return out

