"""Helpers shared by the hidden checks: calls that also prove how the answer was made.

`kernel_call` runs a Triton exercise's function with three probes on (grader/worker/probes.py):
  trace         which torch ops ran and how many Triton kernels launched
  poison_empty  torch.empty & co. hand out NaN, so an output element never written stays NaN
  return_args   the input tensors (and the poison right behind them) after the call
and fails, with the reason, unless a kernel launched, nothing but allocation, views and copies
ran around it, and the inputs and the memory behind them are as they were sent.
"""

from __future__ import annotations

import numpy as np

from grader.judge.answers.compare import CheckFailed, values, where
from grader.sandbox import memory


def second_call(e: CheckFailed, call: int, sub, rerun) -> CheckFailed:
    """The failure of call `call` of two with one shape, with the hint its evidence supports.
    Only a second call that fails where the same call, made again in a fresh worker, is right
    is evidence of something kept between calls; any other failure is the shape's own and
    keeps its message and hint. `rerun(fresh)` makes the call again through `fresh`."""
    if call != 2 or e.follows is not None:
        return e
    with memory.fresh_worker(sub) as fresh:
        try:
            rerun(fresh)
        except Exception:   # noqa: BLE001 - wrong in a fresh worker too: nothing was kept
            return e
    return CheckFailed(f"{e} The same call, made again in a fresh worker, was right.",
                       hint="The first call with this shape was right, and the second was wrong "
                            "here but right in a fresh worker: something is kept between calls "
                            "(a cache keyed by shape, a counter); compute every call from its "
                            "own inputs.")


def assert_untouched(before: list, after: list, names: list[str], what: str, seed: int) -> None:
    """Each array in `after` (sent back by the worker) equals its pristine copy in `before`."""
    if len(after) != len(before):
        raise CheckFailed(f"{what}: the grader could not read the inputs back after the call")
    for name, old, new in zip(names, before, after):
        old = np.asarray(old, dtype=np.float64)
        new = np.asarray(values(new), dtype=np.float64)
        changed = ~((old == new) | (np.isnan(old) & np.isnan(new)))
        if changed.any():
            idx = np.unravel_index(np.argmax(changed), old.shape)
            raise CheckFailed(
                f"{what} [seed {seed}]: changed its input {name}: {int(changed.sum())} of "
                f"{old.size} elements differ after the call (at {where(idx)}: was {old[idx]:.6g}, "
                f"now {new[idx]:.6g}). The inputs belong to the caller: work on copies or new "
                f"arrays.", hint=f"{name} was changed in place by the call: leave {name} as it "
                             f"came, and compute into a copy or a new array.")


def assert_guards_untouched(guards: list, names: list[str], what: str, seed: int) -> None:
    """The NaN placed right behind each input tensor is still NaN: nothing was stored past it.
    Guards that did not come back fail: the evidence was missing, never a pass."""
    if not isinstance(guards, list) or len(guards) < len(names):
        raise CheckFailed(f"{what} [seed {seed}]: the grader could not read back the memory "
                          f"behind the inputs after the call; the evidence was missing, which is "
                          f"never a pass.")
    for name, guard in zip(names, guards):
        g = np.asarray(values(guard), dtype=np.float64)
        if g.size and not np.isnan(g).all():
            raise CheckFailed(f"{what} [seed {seed}]: wrote {int((~np.isnan(g)).sum())} elements "
                              f"into the memory right behind {name}, past its end. Mask every "
                              f"store, and store only into the output.")


def kernel_call(sub, fn: str, args: list, pristine: dict, what: str, seed: int, **kwargs):
    """`fn(*args, **kwargs)` with the probes on; its CallResult, once the inputs are checked.
    `sub` is the check's `student()` proxy, whose every call to a graded function passes the
    kernel-use gate (grader.fixtures.Gated, kernel_use.gate: a launch, no computing torch op);
    args: TensorArgs; pristine: {name: the array each was built from}."""
    r = sub.call(fn, *args, **kwargs,
                 opts={"trace": True, "poison_empty": True, "return_args": True})
    names = list(pristine)
    assert_untouched(list(pristine.values()), r.extras.get("args_after", []), names, what, seed)
    assert_guards_untouched(r.extras.get("guards_after", []), names, what, seed)
    return r


def assert_written(got, expected, what: str, seed: int, extras: dict | None = None) -> None:
    """Every output element was stored by the kernel. "Never written" is claimed only with the
    evidence: under the interpreter, stores into the tensors the call allocated are tracked
    (grader/worker/bounds.py), so an element no store reached is told apart from a NaN the
    kernel computed and stored."""
    from grader.judge.evidence.kernel_use import allocation_of

    g = np.asarray(values(got), dtype=np.float64)
    if g.shape != np.shape(expected):
        return   # assert_close reports the shape
    nan = np.isnan(g) & ~np.isnan(expected)
    alloc = allocation_of(extras or {}, g.size)
    if alloc is not None and alloc["unstored"]:
        idx = np.unravel_index(alloc["first_unstored"], g.shape)
        raise CheckFailed(
            f"{what} [seed {seed}]: {alloc['unstored']} of {g.size} output elements were never "
            f"written by any store, first at {where(idx)}. Every program must store its whole "
            f"tile, masked only past the end of the data.")
    if nan.any():
        idx = np.unravel_index(np.argmax(nan), g.shape)
        stored = (f"; the kernel stored NaN there ({alloc['stored_nan']} NaN stores)"
                  if alloc is not None and alloc["stored_nan"] else "")
        raise CheckFailed(
            f"{what} [seed {seed}]: {int(nan.sum())} of {g.size} output elements are NaN, first "
            f"at {where(idx)}{stored}. Every element was written, so the NaN was computed: look "
            f"at what the loads read (masks, other=) and at 0/0 in the division.",
            hint="The output was written, but with NaN: a value read without its mask, or a "
                 "0 / 0, reached the result.")
