"""Every knob of a grade in one frozen object, `Options`, and what the two command lines
(grader.cli, grader.batch) share: a parser that fails in one line, comma-separated names checked
against a known list, and CPU core lists.

The grader's main process fills `Options` from its command line and the five environment
variables of ENVIRONMENT (docs/INSTRUCTORS.md has the table), and grades inside
`using(options)`: every module asks `current()`. The grading processes of a parallel grade
(grader.parallel, grader/parallel_part.py) get the same options in their requests, as JSON, and nothing
else: no other variable carries a setting. Workers get none of it: their environment is an
allow-list (grader.sandbox.allow_list.environment) that holds no setting but
GRADER_TIMEOUT_SCALE, as it did before these options."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
from dataclasses import dataclass

# the variables an instructor may set where a command line is out of reach (make, a Slurm
# script, run_autograder), each a field below; nothing else in the grader reads a GRADER_ name
ENVIRONMENT = {
    "GRADER_SANDBOX": "sandbox",
    "GRADER_JOBS": "jobs",
    "GRADER_TIMEOUT_SCALE": "timeout_scale",
    "GRADER_TARGET": "target",
    "GRADER_CACHE": "cache",
}


@dataclass(frozen=True)
class Options:
    """How one grade runs. Defaults are a plain grade's; None: the grader decides from the
    machine (its cores, memory, GPU)."""
    sandbox: str = "auto"               # os, user, process or auto (root: os or user, else process)
    jobs: int | None = None             # grading processes (grader.parallel); None: one per core
    timeout_scale: float = 1.0          # stretches every call's time limit (grader.sandbox.launcher)
    target: str | None = None           # a grading target's name (grader.judge.machine.target)
    cache: str = ""                     # the front end's verdicts' folder; "": ~/.cache/lab-grader, "0": none
    seed: int | None = None             # the checks' rng seed; None: fresh every check
    timed_first: bool | None = None     # time first (grader.schedule.timed_first); None: by GPU memory
    measurements: str | None = None     # the grader's own measurements kept in this file (judge.perf.measured_once)
    label: str | None = None            # how messages name the submission folder (run_autograder's upload)
    call_log: str | None = None         # one JSON line per worker call appended here (sandbox.calllog)
    sanitizer_log: str | None = None    # compute-sanitizer's logs appended here
    sanitizer_as_student: bool = False  # compute-sanitizer runs as the sandbox user (judge.evidence.sanitize)
    plain: bool = False                 # no live progress bar, even on a terminal
    no_cuda: bool = False               # grade as on a machine without a GPU
    # tuning, and the repo's tests: what the machine would otherwise decide
    memory_mb: int | None = None        # the memory the grade may use (sandbox.budget); None: the cgroups'
    gpu_split: bool | None = None       # untimed gpu checks in grading processes; None: by the cores
    overlap: bool | None = None         # CPU layers beside the GPU layers; None: by the cores
    bytecode: bool | None = None        # build the workers' bytecode (sandbox.bytecode); None: where missing
    refuse_levels: tuple = ()           # isolation levels to take as refused ("os", "user"): tests only

    @classmethod
    def from_environment(cls, environ=None) -> "Options":
        """The defaults, with ENVIRONMENT's variables read where they are set."""
        environ = os.environ if environ is None else environ
        jobs = environ.get("GRADER_JOBS", "")
        scale = environ.get("GRADER_TIMEOUT_SCALE", "")
        return cls(sandbox=sandbox_level(environ.get("GRADER_SANDBOX", "")),
                   jobs=int(jobs) if jobs.isdigit() else None,
                   timeout_scale=float(scale) if scale else 1.0,
                   target=environ.get("GRADER_TARGET") or None,
                   cache=environ.get("GRADER_CACHE", ""))

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Options":
        known = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in d.items() if k in known}
        fields["refuse_levels"] = tuple(fields.get("refuse_levels") or ())
        return cls(**fields)

    def replace(self, **changes) -> "Options":
        return dataclasses.replace(self, **changes)


def sandbox_level(value: str) -> str:
    """GRADER_SANDBOX's value as a level: os, user, process, or auto."""
    value = value.strip().lower()
    if value in ("1", "os", "yes", "true", "on"):
        return "os"
    if value in ("0", "process", "no", "false", "off"):
        return "process"
    return "user" if value == "user" else "auto"


_in_use: list[Options] = []   # innermost last


def current() -> Options:
    """This process's options: those of the innermost `using`, else the environment's."""
    return _in_use[-1] if _in_use else Options.from_environment()


@contextlib.contextmanager
def using(options: Options):
    """Grade with `options`: `current()` returns them until the block ends."""
    _in_use.append(options)
    try:
        yield options
    finally:
        _in_use.pop()


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command line's flags for Options' fields (grader.cli; `from_args` reads them)."""
    p.add_argument("--sandbox", action=argparse.BooleanOptionalAction, default=None,
                   help="run student code under OS isolation (default: on when run as root, or "
                        "$GRADER_SANDBOX); --no-sandbox: process isolation only")
    p.add_argument("--target", metavar="NAME", default=None,
                   help="also check every Triton kernel launched on CUDA against this GPU's limits "
                        "(gb10: the DGX Spark), from its compiled metadata; the perf layer uses its "
                        "tile shapes (default: $GRADER_TARGET, else none)")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="grading processes for the CPU layers (default: $GRADER_JOBS, else one per core)")
    p.add_argument("--seed", type=int, metavar="N",
                   help="every check's random inputs from this seed (a failure message gives it)")
    p.add_argument("--timed-first", action=argparse.BooleanOptionalAction, default=None,
                   help="time the perf checks first, alone, and verify after (default: on a GPU "
                        "with 64 GiB of its own)")
    p.add_argument("--measurements", metavar="FILE",
                   help="keep the grader's own measurements (SDPA baselines, ceilings) in FILE "
                        "(batch: <out>/measurements.json)")
    p.add_argument("--label", metavar="TEXT", help="name the submission so in messages")
    p.add_argument("--call-log", metavar="FILE",
                   help="append one JSON line per worker call to FILE (python -m tools.call_costs)")
    p.add_argument("--sanitizer-log", metavar="FILE", help="append compute-sanitizer's logs to FILE")
    p.add_argument("--sanitizer-as-student", action="store_true", default=None,
                   help="run compute-sanitizer as the sandbox user (a driver that refuses root "
                        "watching another user)")
    p.add_argument("--plain", action="store_true", default=None, help="no live progress bar")
    p.add_argument("--no-cuda", action="store_true", default=None, help="grade as on a machine without a GPU")
    tuning = p.add_argument_group("tuning and the repo's tests (the machine decides by default)")
    tuning.add_argument("--memory-mb", type=int, metavar="MB",
                        help="the memory the grade may use (default: its cgroups' limit)")
    tuning.add_argument("--gpu-split", action=argparse.BooleanOptionalAction, default=None,
                        help="the untimed gpu checks in grading processes of their own")
    tuning.add_argument("--overlap", action=argparse.BooleanOptionalAction, default=None,
                        help="the CPU layers beside the GPU layers")
    tuning.add_argument("--bytecode", action=argparse.BooleanOptionalAction, default=None,
                        help="build the workers' bytecode of torch and co. for the run")
    tuning.add_argument("--refuse-levels", type=lambda v: names(v, ("os", "user"), "level"),
                        metavar="LEVELS", help="take these isolation levels as refused")


def from_args(args: argparse.Namespace, environ=None) -> Options:
    """Options from the environment, then the command line's flags (`add_arguments`) over them."""
    base = Options.from_environment(environ)
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(Options)
             if f.name != "sandbox" and getattr(args, f.name, None) is not None}   # every default: None
    if args.sandbox is not None:
        given["sandbox"] = "os" if args.sandbox else "process"
    if "refuse_levels" in given:
        given["refuse_levels"] = tuple(given["refuse_levels"])
    return base.replace(**given)


def names(value: str, known, what: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in items if v not in known]
    if unknown or not items:
        raise argparse.ArgumentTypeError(
            f"unknown {what} {', '.join(unknown) or repr(value)}; choose from {', '.join(known)}")
    return items


def cpu_list(value: str) -> list[int]:
    """--cpus: core numbers as `taskset -c` writes them ("0-3,8,10-11"), each one this process
    may run on (os.sched_getaffinity)."""
    cores = set()
    try:
        for part in (p.strip() for p in value.split(",") if p.strip()):
            first, _, last = part.partition("-")
            cores.update(range(int(first), int(last or first) + 1))
    except ValueError:
        cores = set()
    allowed = os.sched_getaffinity(0)
    if not cores or not cores <= allowed:
        raise argparse.ArgumentTypeError(
            f"--cpus wants cores this process may use ({cpu_text(sorted(allowed))}), got {value!r}")
    return sorted(cores)


def cpu_text(cores: list[int]) -> str:
    """Core numbers as --cpus takes them: "0-3,8"."""
    runs: list[list[int]] = []
    for c in sorted(cores):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not argparse's usage block
        print(f"grader: {message} (see python -m grader --help)", file=sys.stderr)
        raise SystemExit(2)
