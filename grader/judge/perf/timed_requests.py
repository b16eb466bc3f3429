"""The student's function as timed requests in its worker, every output verified afterwards.

Every call the perf layer makes into student code is one shape: {"runs": spec}: R calls back
to back, the first tensor argument refilled from a fresh seed before each,
each output reduced to a checksum right after. Nothing the worker can read says whether the
grader will time it, compare its checksums or compare its last output in full: it times all,
and chooses after the call which runs to check and whether to fetch the last output (a second
request that runs no student code). The time of R calls is the difference between two requests
(grader.judge.perf.timing.per_call_ms), and every request's outputs are verified afterwards
(Requests.verify), one traced call replayed from its kernels (grader.judge.evidence.provenance):
work skipped anywhere shows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import time

from grader.errors import GraderError
from grader.judge.perf.events import torch_or_default as _torch
from grader.wire.checksum import checksum_weights, refill
from grader.wire.codec import TensorArg

UNIT_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -24}
_MISSING = "nothing"      # what a fetch that found no output is recorded as


def runs_spec(rng, count: int, arg: int = 0, std: float = 1.0) -> dict:
    """`count` calls, argument `arg` refilled before each from a fresh seed (normal, std)."""
    seeds = [int(x) for x in rng.integers(1, 2 ** 62, size=count)]
    return {"arg": int(arg), "seeds": seeds, "std": float(std),
            "weights": int(rng.integers(1, 2 ** 62))}


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


class Requests:
    """The student's function as `request(repeat)` for per_call_ms, run in its worker.

        reqs = Requests(sub, "softmax", [marker], rng=rng, reference=softmax_ref, inputs=[x],
                        dtype="float16", what="softmax(x)")
        ms = timing.per_call_ms(reqs)   # times requests of 1 + repeat calls each
        reqs.verify()                   # then checks every request's outputs, chosen at random

    reference(list_of_inputs) -> the float32/64 reference output on the GPU, where the inputs
    are the trusted copies with argument `arg` refilled from the run's seed. A function that
    returns a tuple of tensors has a tuple reference; its checksum is the sum of theirs.
    `inputs` is that list, or a function that makes it (drawn again from the markers' seeds:
    a verification that waits holds no gigabytes meanwhile), called once per verify().

    slack: the checksum tolerance in units of 8 unit roundoffs of `dtype` per row (gradients,
    sums over N products with cancellation, need more than an output of a softmax);
    compare(got, expected, case): the full comparison of a fetched last output (default
    grader.judge.answers.compare.assert_close in `dtype`; needed for tuple outputs).
    """

    def __init__(self, sub, fn: str, args: list, *, rng, reference, inputs, dtype: str,
                 what: str, kwargs: dict | None = None, arg: int = 0, std: float = 1.0,
                 checked_runs: int = 2, full_share: float = 0.3,
                 slack: float = 1.0, compare=None, program_share: float = 0.3):
        self.sub, self.fn, self.args, self.kwargs = sub, fn, list(args), dict(kwargs or {})
        # an array argument (flash_bwd's given o: 64 MiB at N = 8K, about 150 ms of pipe and
        # jitter of tens of ms in every request's time) crosses with the first request only;
        # later requests name the values the worker kept (codec.TensorArg.kept). self.args,
        # whole, is what a replay of a timed call is built from
        self.whole = [_kept(a) for a in self.args]
        self.named = [_by_key(a) for a in self.whole]
        self.held = False        # whether the worker holds the arrays (after a request)
        self.rng, self.reference = rng, reference
        self.inputs = inputs if callable(inputs) else list(inputs)
        self.dtype, self.what, self.arg, self.std = dtype, what, arg, std
        self.slack, self.compare = slack, compare
        self.checked_runs, self.full_share = checked_runs, full_share
        self.done: list = []     # (spec, CallResult, fetched output, traced call) per request
        # a gated function's timed calls are recorded (grader.fixtures.ProvingSubmission.records_timed):
        # after a request, with `program_share`, the trace of one call picked at random is
        # fetched; verify() replays one of those picked (provenance of the timed answers)
        # (looked up on the type: a plain Submission answers any attribute with a student call)
        records = getattr(type(sub), "records_timed", None)
        self.recorded = bool(records(sub, fn)) if callable(records) else False
        self.program_share = program_share
        # the most memory a replayed timed call held beyond its inputs, counted in the replay
        # worker (the memory checks' evidence); None until a replay on CUDA counted it
        self.replayed_peak: int | None = None
        self.last_ms = 0.0       # wall time of the last request's calls (not of its fetch)

    def __call__(self, repeat: int) -> float:
        """Run 1 + repeat calls; returns the milliseconds of that request alone (the fetch of
        its last output, when chosen, comes after the clock stops)."""
        self.call(1 + repeat)
        return self.last_ms

    @contextlib.contextmanager
    def scored(self, on: bool):
        """Within `with reqs.scored(False):` requests are made the same way, but their outputs
        are not checked (verify leaves them out): per_call_ms's warm-up and probe, whose times
        count for nothing. The worker sees the same requests either way."""
        before, self._scored = self._scored, on
        try:
            yield self
        finally:
            self._scored = before

    _scored = True

    def call(self, count: int):
        spec = runs_spec(self.rng, count, self.arg, self.std)
        start = time.perf_counter()
        result = self._runs(spec)
        self.held = True
        self.last_ms = (time.perf_counter() - start) * 1e3
        if not self._scored:
            return result
        # chosen now, after the call: fetch the last output to compare it in full?
        out = None
        if self.rng.random() < self.full_share:
            out = self.sub.call(self.fn, opts={"fetch": True}).value
            if out is None:
                out = _MISSING
        traced = None
        if self.recorded and self.rng.random() < self.program_share:
            traced = self._traced(count)
        self.done.append((spec, result, out, traced))
        return result

    def _runs(self, spec: dict):
        opts = {"runs": spec}
        if self.held:
            try:
                return self.sub.call(self.fn, *self.named, opts=opts, **self.kwargs)
            except GraderError:
                # a worker started afresh since the arrays crossed (the last one died between
                # two requests) holds none: they cross again, as before a worker kept any
                self.held = False
        return self.sub.call(self.fn, *self.whole, opts=opts, **self.kwargs)

    def _traced(self, count: int) -> tuple:
        """(j, trace) of call j of the last request, j drawn now, after the request."""
        j = int(self.rng.integers(count))
        value = self.sub.call(self.fn, opts={"programs": [j]}).value
        got = value.get("programs") if isinstance(value, dict) else None
        return j, (got[0] if isinstance(got, list) and got and isinstance(got[0], dict) else {})

    def checked(self):
        """After the last request, while its worker is as timing left it: what only the worker
        holds (one traced call of the last request, when no request's trace was picked) is
        fetched now, and the verification of every request is returned, to run now or later
        (grader.fixtures `after_timing`): it needs only the grader's own tensors and the replay worker."""
        self._trace_one()
        return self.verify

    def _trace_one(self) -> None:
        if self.recorded and self.done and not any(d[3] for d in self.done):
            # no request's trace was picked: one call of the last request's now (still kept)
            spec, result, out, _ = self.done[-1]
            self.done[-1] = (spec, result, out, self._traced(len(spec["seeds"])))

    def verify(self) -> int:
        """Compare the outputs of every request made so far; returns how many runs were checked.
        Raises CheckFailed at the first wrong one."""
        from grader.sandbox import calllog

        with calllog.span("verify", getattr(self.sub, "exercise", ""), fn=self.fn):
            return self._verify()

    def _verify(self) -> int:
        torch = _torch(None)
        self._trace_one()
        lazy = callable(self.inputs)
        inputs = self.inputs() if lazy else self.inputs
        try:
            checked, due = self._checksums(inputs, torch)
        finally:
            if lazy:   # drawn for this verification: their memory goes back before the replay
                del inputs
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
        if due:
            self._replay(due[int(self.rng.integers(len(due)))])
        return checked

    def _checksums(self, inputs: list, torch) -> tuple[int, list]:
        """Every request's picked runs against the references on `inputs`: (how many runs
        were checked, the traced calls among them, one of which is replayed)."""
        from grader.judge.answers import compare
        from grader.judge.answers.compare import CheckFailed

        checked = 0
        due = []   # (number, spec, j, trace, checksum, tolerance) of the traced calls
        for number, (spec, result, out, traced) in enumerate(self.done, 1):
            value = result.value
            seeds = spec["seeds"]
            sums = value.get("sums") if isinstance(value, dict) else None
            if not isinstance(sums, list) or len(sums) != len(seeds):
                raise CheckFailed(f"{self.what}: timed request {number} sent back no checksum per "
                                  f"call ({len(seeds)} calls made)")
            last = len(seeds) - 1
            # chosen now, after the call: the worker could not know which runs are looked at
            picks = sorted(set(self.rng.choice(len(seeds), size=min(self.checked_runs, len(seeds)),
                                               replace=False).tolist()) | {last}
                           | ({traced[0]} if traced else set()))
            for j in picks:
                expected = self._reference(inputs, seeds[j])
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
                if traced and j == traced[0]:
                    due.append((number, spec, j, traced[1], got, tol))
                if j == last and out is not None:
                    case = f"the last call of timed request {number}"
                    if self.compare is not None:
                        self.compare(out, expected, case)
                    elif not hasattr(out, "array"):
                        raise CheckFailed(f"{self.what}: timed request {number} returned "
                                          f"{type(out).__name__}, not the output tensor")
                    else:
                        compare.assert_close(out, expected, what=self.what, dtype=self.dtype,
                                             case=case)
                checked += 1
                del expected
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        self.done.clear()
        return checked, due

    def _replay(self, traced: tuple) -> None:
        """One traced timed call, picked after every request: its program replayed on its own
        inputs (grader.fixtures.ProvingSubmission.check_timed), its checksum equal to the call's."""
        from grader.judge.evidence.replayed import TimedCall

        number, spec, j, extras, got, tol = traced
        count = len(spec["seeds"])
        refill = {"arg": self.arg, "seed": spec["seeds"][j], "std": spec["std"]}
        summed = {"weights": spec["weights"], "tuple": bool(extras.get("tuple"))}
        timed = TimedCall(refill, summed, got, tol)
        self.sub.check_timed(self.fn, self.args, self.kwargs, extras, timed,
                             f"{self.what}, call {j + 1} of {count} in timed request {number}")
        if timed.peak_bytes is not None:
            self.replayed_peak = max(self.replayed_peak or 0, timed.peak_bytes)

    def memory_bytes(self) -> int:
        """The memory the replayed timed call held beyond its inputs, once verified: the GPU
        memory checks' evidence. No count (replays off, or not on CUDA) is the grader's error,
        never a pass."""
        if self.replayed_peak is None:
            raise GraderError(f"{self.what}: no replay of a timed call counted its memory "
                              f"(replays off, or not on CUDA), so there is no evidence to judge")
        return self.replayed_peak

    def _reference(self, inputs: list, seed: int):
        inputs = list(inputs)
        fresh = _torch(None).empty_like(inputs[self.arg])
        refill(fresh, seed, self.std)
        inputs[self.arg] = fresh
        return self.reference(inputs)


_KEYS = itertools.count(1)


def _kept(a):
    """An array marker that asks the worker to keep its values under a key of its own."""
    if isinstance(a, TensorArg) and a.array is not None:
        return dataclasses.replace(a, kept=f"timed-{next(_KEYS)}")
    return a


def _by_key(a):
    """The same marker without its array: built from the values the worker kept."""
    if isinstance(a, TensorArg) and a.kept:
        return dataclasses.replace(a, array=None)
    return a
