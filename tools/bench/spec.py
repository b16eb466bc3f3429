"""What an exercise declares for `make bench`: grader/exercises/<ex>/bench.py's BENCHMARKS.

A Benchmark is data, in the shape of Triton's `triton.testing.Benchmark`: the x values of its
sweep per kind of run, its providers (the lines of its plots), the formula behind its rate
(FLOPs or bytes per row, and the text printed beside the number), its plots and its table. Its
`trials` say how one row is checked and how it is timed; the shared runner (tools.bench.runner)
plans, checks, times, and writes every benchmark the same way (tools.bench.harness.measure_row:
validate, then time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

SIZES = ("full", "quick", "cpu")   # `make bench`, --quick, --device cpu (testing the tool); a
                                   # machine without a GPU runs the host benchmarks at "full"


@dataclass
class Trial:
    """One row to measure: check() raises when the output is wrong (the row is then not timed),
    time() -> ms per call; explain(exception) -> the row's error text (default: the exception's
    type and first line)."""
    row: dict
    check: Callable[[], None]
    time: Callable[[], float]
    explain: Callable[[BaseException], str] | None = None


@dataclass(frozen=True)
class Plot:
    """One PNG: title(rows, report) -> str; draw(ax, rows, report) -> whether it drew a measured line (else the plot says
    "no measurements"). panels: ((title, row filter), ...) side by side, one draw each."""
    name: str
    title: Callable[[list, dict], str]
    xlabel: str
    ylabel: str
    draw: Callable
    panels: tuple = ()
    n_ticks: bool = False        # x ticks at the rows' N: 512, 1K, ... 16K
    from_zero: bool = False      # y axis from 0 (rates)


@dataclass(frozen=True)
class Benchmark:
    """A sweep: rows of x values (x_names) by provider, each with ms and its rate.

    x_vals[size]: the x values of each kind of run (SIZES); plan(values, budget, profile, bhd) ->
    (the values to run, rows skipped with a note), decided before anything is allocated.
    trials(ctx, values) yields a Trial per row, or a list of finished rows (a run that times
    itself). work(row, ctx) -> FLOPs or bytes of the row; rate = work / time in `unit` ("tflops":
    TFLOP/s, "gflops": GFLOP/s, "gbs": GB/s), `formula` its text. table(rows, report) -> measure.md's section
    (report: {"preds", "ceil", "bhd"}); synthetic() -> made-up rows for --dry-run."""
    name: str
    x_names: tuple
    x_vals: dict
    providers: tuple
    unit: str
    formula: str
    trials: Callable
    work: Callable | None = None
    plan: Callable | None = None
    table: Callable | None = None
    plots: tuple = ()
    synthetic: Callable | None = None
    json: str = ""               # its rows' file, "" for <name>_bench.json (a file that
                                 # several benchmarks share holds {name: rows})
    order: int = 100             # its place in the run and in measure.md
    finish: Callable | None = None   # rows -> rows, after the skipped ones are added
    gpu_only: bool = False       # not run under the interpreter (--device cpu)
    host: bool = False           # NumPy on the CPU, no torch: the one kind of benchmark a
                                 # machine without a CUDA GPU runs (device "host": a laptop)

    @property
    def file(self) -> str:
        return self.json or f"{self.name}_bench.json"

    def rate(self, row: dict, ms: float, ctx) -> float:
        scale = {"tflops": 1e9, "gbs": 1e6, "gflops": 1e6}[self.unit]   # FLOPs / ms / 1e9 = TFLOP/s
        return self.work(row, ctx) / ms / scale


def fits_all(values, budget, profile, bhd):
    """The default plan: every x value, none skipped."""
    return list(values), []
