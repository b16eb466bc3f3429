"""What a benchmark's trials stand on: the run's context and the one validate-then-time helper.

    row = measure_row(bench, trial, ctx)   # trial.check(), then trial.time(), then the rate

Student code runs through the grader's launcher (the same sandbox and workers as grading) and
is timed here, on this process's clock (ctx.student_ms: grader.judge.perf.timed_requests, an
input refilled before every call, a checksum after, every timed request's outputs verified
afterwards); trusted code is timed in the same harness (ctx.trusted_ms). Under --device cpu
(testing the tool) times are the round trip of a call, best of two.
"""

from __future__ import annotations

import time

import numpy as np


class Deadline(Exception):
    """The run's time is spent: the rows finished so far are kept."""


def first_line(e) -> str:
    return (str(e).strip().splitlines() or [""])[0]


def default_explain(e: BaseException) -> str:
    return f"{type(e).__name__}: {first_line(e)[:200]}"


def measure_row(bench, trial, ctx) -> dict:
    """Validate, then time (llm.c's validate_result then benchmark_kernel): a row whose output
    is wrong, or that cannot run, says why in row["error"] and has no time."""
    row = trial.row
    row.setdefault("ms", None)
    row.setdefault(bench.unit, None)
    row.setdefault("error", None)
    try:
        trial.check()
        row["ms"] = trial.time()
        row[bench.unit] = bench.rate(row, row["ms"], ctx)
    except Deadline:
        raise
    except Exception as e:  # noqa: BLE001 - a row that could not be measured says why
        row["error"] = (trial.explain or default_explain)(e)
    return row


def max_err(value, ref) -> float:
    """Largest |value - ref| of a tensor the worker sent back (.array) against a trusted one."""
    arr = getattr(value, "array", None)
    if arr is None or tuple(arr.shape) != tuple(ref.shape):
        raise AssertionError(f"returned {type(value).__name__}, not a tensor of shape "
                             f"{tuple(ref.shape)}")
    if not np.isfinite(arr).all():
        return float("inf")
    return float(np.max(np.abs(arr.astype(np.float64) - ref.double().cpu().numpy())))


def assert_near(value, ref, what: str, rel: float = 2e-2) -> None:
    """max abs error within rel x max(1, |ref|'s largest magnitude), else AssertionError."""
    err = max_err(value, ref)
    tol = rel * max(1.0, float(ref.abs().max()))
    if not err <= tol:
        raise AssertionError(f"{what}: wrong result, max abs error {err:.2e} against the "
                             f"reference (allowed {tol:.1e})")


class Context:
    """One run of the benchmarks: its plan, the submission's workers, the timers and inputs.

    plan: {"device", "bhd", "warmup", "rep", <benchmark name>: its planned x values, ...};
    student(module) -> the submission's worker for that exercise (None: no submission); have:
    the exercises the submission has a file for; error(where, e) -> the text, recorded in the
    report's problems; inputs(shape, count) and trusted_ms(fn, args, target_ms) replace the
    methods of those names (the tests')."""

    def __init__(self, plan: dict, student=None, have=(), error=None, deadline=None,
                 inputs=None, trusted_ms=None):
        self.plan, self.device = plan, plan["device"]
        self.bhd = tuple(plan.get("bhd", (1, 32, 128)))
        self.mode = {"cpu": "interp", "host": "cpu"}.get(self.device, "cuda")
        self.student, self.have = student, set(have)
        self.errors: list[str] = []
        self._error = error
        self.deadline = deadline
        if inputs is not None:          # a test's own inputs and timer
            self.inputs = inputs
        if trusted_ms is not None:
            self.trusted_ms = trusted_ms

    def error(self, where: str, e) -> str:
        text = f"{where}: {type(e).__name__}: {first_line(e)}"
        if self._error is not None:
            return self._error(where, e) or text
        self.errors.append(text)
        print("bench:", text, flush=True)
        return text

    def worker(self, module: str, mode: str | None = None):
        """The submission's worker for `module` (in `mode`, by default the run's: "cuda", or
        "interp" under --device cpu; a NumPy benchmark asks for "cpu"); FileNotFoundError when
        the submission has no such file."""
        if self.student is None or module not in self.have:
            raise FileNotFoundError(f"{module}.py is not in the submission")
        sub = self.student(module, mode or self.mode)
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise Deadline
            sub.timeout_s = left
        return sub

    def inputs(self, shape, count: int, dtype: str = "float16"):
        """`count` fresh seeded tensors: markers the worker draws itself, and the same values
        here."""
        from grader.judge.answers.inputs import seeded, torch_randn

        seeds = [int(x) for x in np.random.default_rng().integers(0, 2**31 - 1, size=count)]
        return ([seeded(shape, dtype, self.device, s) for s in seeds],
                [torch_randn(shape, dtype, self.device, s) for s in seeds])

    def trusted_ms(self, fn, args, target_ms: float = 150.0) -> float:
        """Trusted code (PyTorch) in the perf harness; under --device cpu, time_cuda on CPU."""
        if self.device == "cpu":
            from grader.judge.machine import ceilings

            return ceilings.time_cuda(lambda: fn(*args), warmup=self.plan.get("warmup", 1),
                                      rep=self.plan.get("rep", 2), device="cpu")
        from grader.judge.perf import baselines

        return baselines.harness_ms(fn, args, target_ms)

    def student_ms(self, sub, fn: str, args, kwargs, *, reference, inputs, arg: int = 0,
                   slack: float = 1.0, compare=None, target_ms: float = 150.0) -> float:
        """The student's `fn` timed like the perf layer, each timed request's outputs verified
        afterwards against reference(inputs with argument `arg` refilled)."""
        if self.device == "cpu":   # testing the tool: the round trip of a call, best of two
            return 1e3 * min(sub.call(fn, *args, **kwargs).wall_s for _ in range(2))
        from grader.judge.perf import timed_requests, timing

        reqs = timed_requests.Requests(sub, fn, list(args), kwargs=kwargs,
                                       rng=np.random.default_rng(), reference=reference,
                                       inputs=list(inputs), dtype="float16", what=fn, arg=arg,
                                       slack=slack, compare=compare)
        ms = timing.per_call_ms(reqs, target_ms=target_ms)
        reqs.verify()
        return ms

    def free(self) -> None:
        """Give cached GPU memory back between cases."""
        if self.device not in ("cpu", "host"):
            import torch

            torch.cuda.empty_cache()
