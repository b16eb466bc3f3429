"""A gated call's program replayed a second time, on nearby inputs, against the reference (moved inputs).

The replay on the call's own inputs (grader.judge.evidence.provenance) proves that the recorded launches
compute what the call returned. But a launch's scalar arguments are the wrapper's to choose: it
could compute part of the answer outside the kernels (a row's max in NumPy, the whole output of
a tiny call) and pass it to a kernel as a number. The kernels then compute the right answer
from the call's inputs and the smuggled numbers, and the first replay agrees. Replayed on other
values, the same program still carries the old values' numbers.

So the program runs once more on inputs of the same shapes whose every value is moved by a
random factor within SPREAD (signs, zeros, infinities, the regime a check built, such as "every
score shifted up by 16", all kept: a kernel right on the call's inputs only because of that
regime stays right). Its error against the reference of the new inputs, row by row (root mean
square, relative to the outputs' scale), may be at most GROWTH times the call's own largest
error against the reference of its inputs (at least the dtype's rounding): an honest kernel errs
about the same on both; numbers carried over from the old values put the new answer a few
percent off, tens to hundreds of times a correct answer's rounding. Where the moved inputs are
worse conditioned than the call's own (a near-tie at a row's max that the new values made, with
scores in the hundreds), an exercise may give each row a floor: a first-order bound of what a
correct kernel's rounding of its intermediates in the inputs' dtype can add there (flash_decode:
scores rounded to float16), which the limit of that row is then at least.

Each Triton exercise says how to move its inputs and what they should give, in its folder's
`kernel.py`: `moved_inputs(fn, args, kwargs, rng)` -> MovedInputs, or None for a call it has no form for.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from grader.judge.answers.compare import EPS, CheckFailed
from grader.judge.answers.inputs import round_to
from grader.judge.evidence.replayed import refused, replay_failed, tensors_of
from grader.wire.codec import TensorArg

SPREAD = 0.2      # each value times a factor in [1 - SPREAD, 1 + SPREAD]
# the new error may be GROWTH times the call's own, or times ROUNDING units of the dtype's
# roundoff where the call's was smaller. Measured over the solutions and the correct variants
# (886 calls, CPU layers): an honest kernel's largest error on the moved inputs was 2.4 times
# that base; host_max_in_scalars's smallest, 34 times it
GROWTH = 8.0
ROUNDING = 2.0
# Which calls get the second replay (wanted): every call whose output is small enough for the
# scalars to carry it whole (BITS per element), or whose launches carry more than an honest
# wrapper's (more than FLOATS distinct floats, any string, more than LAUNCHES launches); of the
# others, each with probability SAMPLE, drawn after the call. A submission that computes outside
# the kernels on most calls is caught with certainty; one that does it on one call of a check,
# with probability SAMPLE. The second replay costs as much as the call under the interpreter:
# on every call it made a CPU-layer grade of the solutions 36% slower (28 -> 38 s on 2 cores);
# chosen so, 108 of its 154 gated calls are small and replayed, and it takes 31 s.
BITS = 4
FLOATS = 1
LAUNCHES = 4
SAMPLE = 0.25
# An error past the limit must repeat on TRIES independent draws before it fails the call:
# numbers carried over from the call's values put every draw off, while an honest kernel errs
# past it only where the moved values happen to make a row worse conditioned than the exercise's
# floor (MovedInputs.floor) foresees, which a second draw rarely repeats. (Without its floor,
# decode_fp16_elementwise_qk, float16 scores, was past the limit at flash_decode.large_scores's
# near-ties on 11% of emulated draws, and failed CI on two draws in a row)
TRIES = 2
# the most elements the call's tensors may hold together for a second replay: its float64
# references are computed here, in NumPy (the CPU layers' inputs are far smaller)
MAX_ELEMENTS = 1 << 22


@dataclass
class MovedInputs:
    """New arguments for the call (same shapes, dtypes, guards and padding; moved values), the
    float64 reference of every output on them (`expected`) and on the call's own inputs
    (`before`), in the order the call returns its outputs; `floor`, where the exercise gives one:
    for each output, each row's (last axis) largest error a correct kernel can reach on the new
    arguments, in the output's units (None: the dtype's rounding covers it)."""
    args: list
    kwargs: dict
    expected: list
    before: list
    floor: list | None = None


def redrawn(marker, rng, values: np.ndarray | None = None):
    """`marker` (a TensorArg holding its values) with new ones: `values` (exact in its dtype),
    or its own, each times a random factor in [1 - SPREAD, 1 + SPREAD], rounded to its dtype.
    Anything else is returned as it is."""
    if not isinstance(marker, TensorArg) or marker.array is None:
        return marker
    if values is None:
        x = np.asarray(marker.array, dtype=np.float64)
        factor = 1.0 + SPREAD * np.clip(rng.standard_normal(x.shape), -1.0, 1.0)
        with np.errstate(invalid="ignore"):
            values = round_to(np.where(np.isfinite(x), x * factor, x), marker.dtype)
    return dataclasses.replace(marker, array=np.asarray(values))


def values(marker) -> np.ndarray:
    """The float64 values a TensorArg builds in the worker (already exact in its dtype)."""
    return np.asarray(marker.array, dtype=np.float64)


def drawable(args: list, kwargs: dict) -> bool:
    """Whether every float tensor of the call carries its values (the CPU layers and the small
    GPU calls); tensors the worker draws itself from a seed are the GPU's large ones, whose
    outputs are far larger than what launch scalars can carry (validated.SCALARS); and at most
    MAX_ELEMENTS in all."""
    markers = [m for m in [*args, *kwargs.values()] if isinstance(m, TensorArg)]
    return (bool(markers) and all(m.array is not None for m in markers)
            and sum(np.size(m.array) for m in markers) <= MAX_ELEMENTS)


def wanted(carried: dict, value, capacity_bits: int, rng=None) -> bool:
    """Whether a call whose program carries `carried` (grader.judge.evidence.validated.validate)
    and returned `value` gets the second replay (see BITS, FLOATS, LAUNCHES, SAMPLE)."""
    elements = sum(int(np.size(t.array)) for t in tensors_of(value))
    if elements * BITS <= capacity_bits:
        return True
    if (len(carried.get("float", ())) > FLOATS or carried.get("str")
            or carried.get("launches", 0) > LAUNCHES):
        return True
    return (rng or np.random.default_rng()).random() < SAMPLE


def tensors(args: list, n: int) -> bool:
    """Whether the call's first n arguments are all tensors (an exercise's form needs them)."""
    return len(args) >= n and all(isinstance(a, TensorArg) for a in args[:n])


def moved(args: list, kwargs: dict, rng, n: int, reference, floor=None) -> MovedInputs | None:
    """The usual form: the call's first n arguments moved (redrawn), the others kept;
    `reference(*arguments)` (tensors as float64 arrays, the rest as given) -> the outputs, on
    the moved arguments and on the call's own; `floor(*arguments)`, where given, -> each
    output's rows' floor on the moved arguments (MovedInputs.floor). None unless the first n are
    tensors."""
    if not tensors(args, n):
        return None
    new = [redrawn(a, rng) for a in args[:n]] + list(args[n:])

    def answer(fn, arguments):
        return list(fn(*(values(a) if isinstance(a, TensorArg) else a for a in arguments)))
    return MovedInputs(new, kwargs, answer(reference, new), answer(reference, args),
                 answer(floor, new) if floor is not None else None)


def form_of(exercise: str, fn: str, args: tuple, kwargs: dict, rng):
    """The exercise's MovedInputs for this call (its `kernel.py`: every exercise with gated kernels
    has one, tests/test_provenance.py), or None where it has no form for `fn`."""
    from grader import registry

    if not registry.EXERCISES[exercise].kernels or not drawable(list(args), kwargs):
        return None
    return registry.exercise_module(exercise, "kernel").moved_inputs(fn, list(args), dict(kwargs), rng)


def scale_of(outputs: list) -> float:
    """The largest root mean square among a call's reference outputs (finite values): what
    every row's error is measured against. One scale for all rows, not each row's own norm: a
    row whose answer is nearly zero (dq at N = 1 is all zeros) would turn rounding into a large
    relative error, different from one draw to the next."""
    rms = [float(np.sqrt(np.mean(np.where(np.isfinite(w), w, 0.0) ** 2)))
           for w in (np.asarray(o, dtype=np.float64) for o in outputs) if w.size]
    return max(rms, default=0.0)


def row_errors(got: np.ndarray, want: np.ndarray, scale: float) -> np.ndarray:
    """Each row's (last axis) root mean square error, relative to `scale`. NaN where both are
    NaN counts as equal; NaN or inf on one side only, as an infinite error."""
    got, want = (np.asarray(a, dtype=np.float64) for a in (got, want))
    width = want.shape[-1] if want.ndim else 1
    got, want = got.reshape(-1, width), want.reshape(-1, width)
    finite = np.isfinite(want)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(same, 0.0, np.abs(got - np.where(finite, want, 0.0)))
        diff = np.where(np.isnan(diff) | (~finite & ~same), np.inf, diff)
        return np.sqrt((diff * diff).mean(axis=1)) / max(scale, 1e-30)


def judge(form: MovedInputs, replay, draw, value, call: str) -> None:
    """The second replay of a call that returned `value`: `replay(form)` -> the program's
    outputs on the form's arguments, compared (`compare`); where they err past the limit, again
    on a new draw (`draw()` -> MovedInputs), up to TRIES draws, and only the last failure counts."""
    for attempt in range(TRIES):
        got = replay(form)
        try:
            return compare(got, form, value, call)
        except CheckFailed:
            if attempt == TRIES - 1:
                raise
            form = draw()


def compare(replayed, form: MovedInputs, value, call: str) -> None:
    """The second replay's outputs against the reference of the moved inputs, row by row, at
    most GROWTH times the error of what the call returned (`value`) against its own."""
    replay_failed(replayed, call)
    got, returned = tensors_of(replayed.get("outputs")), tensors_of(value)
    if not (len(got) == len(returned) == len(form.expected) == len(form.before)):
        raise refused(call, f"replayed on inputs of the same shapes, its recorded launches made "
                            f"{len(got)} output tensors, the call returns {len(form.expected)}")
    new_scale, own_scale = scale_of(form.expected), scale_of(form.before)
    floors = form.floor or [None] * len(got)
    for i, (g, r, want, before, floor) in enumerate(zip(got, returned, form.expected,
                                                        form.before, floors)):
        what = f"output {i}" if len(got) > 1 else "the output"
        a, want = np.asarray(g.array), np.asarray(want)
        if a.shape != want.shape or np.shape(r.array) != np.shape(before):
            raise refused(call, f"replayed on inputs of the same shapes, {what} has shape "
                                f"{a.shape}, the reference {want.shape}")
        if not a.size:
            continue
        own = float(np.nanmax(row_errors(r.array, before, own_scale), initial=0.0))
        if not np.isfinite(own):
            continue   # the call's own answer is not finite where it should be: its check says so
        new = row_errors(a, want, new_scale)
        limit = np.full(new.shape, GROWTH * max(own, ROUNDING * EPS.get(g.dtype, EPS["float32"])))
        if floor is not None:   # the exercise's bound of a correct kernel's rounding, row by row
            limit = np.maximum(limit, np.reshape(floor, -1) / max(new_scale, 1e-30))
        bad = ~(new <= limit)
        if bad.any():
            row = int(np.argmax(np.where(np.isnan(new), np.inf, new / limit)))
            raise refused(call, f"its kernels do not compute the answer from the inputs: the "
                                f"same launches replayed on inputs of the same shapes, each value "
                                f"moved by at most {SPREAD:.0%}, give {what} with an error of "
                                f"{new[row]:.3g} (root mean square, relative to the output's "
                                f"scale) in row {row}, over its limit {limit[row]:.3g} "
                                f"({int(bad.sum())} of {new.size} rows over theirs), where the call's own answer erred by at most "
                                f"{own:.3g}. A launch argument carries numbers computed from the "
                                f"call's values outside the kernels (a max, a sum, the answer): "
                                f"pass only sizes, strides, block sizes and the scale")
