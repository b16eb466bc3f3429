"""The plan of a grade, as data: which layers go to parallel grading processes and how many
(`split_plan`, `jobs_for`, `gpu_jobs`, `beside_jobs`, `after_timing_jobs`), whether the timed
checks run first with the machine alone (`timed_first`), and the order in which grader.parallel
hands out its requests (`queue_for`). Pure functions of the exercises, the layers, the machine
(its cores, its cgroup's CPU quota, its GPU memory) and the grade's options; grader.run executes
the plan, grader.parallel runs the processes.

The order of the requests: the longest first (LPT scheduling), so the last to finish is not a
long one begun late. How long a request takes: the seconds its exercise's layers took in a
grade of the solutions on a GPU box (Exercise.seconds in each exercise's rows.py), else
CHECK_SECONDS per check (why not the count of checks: docs/MEASUREMENTS.md).
"""

from __future__ import annotations

import os
from pathlib import Path

from grader import options
from grader.registry import EXERCISES, Check
from grader.sandbox import budget

GPU_SPLIT = "gpu"   # the untimed GPU layer, split only on a CUDA machine with cores to spare
# per check where an exercise gives no seconds: interp is slow, a gpu check compiles kernels
CHECK_SECONDS = {"cpu": 0.3, "adversarial": 1.0, "interp": 3.0, "gpu": 20.0}
CPU_LAYERS = ("cpu", "adversarial", "interp")
MAX_JOBS = 8
MAX_GPU_JOBS = 12   # the lab's untimed gpu checks that may share the GPU: 10 today
OVERLAP_CORES = 8   # below this the CPU layers wait for the GPU layers to finish
# the timed checks go first only on a GPU with room for what waits to be verified and for the
# untimed checks' processes beside it: an 80 GB H100 has it, with flash_decode's sizes held to
# an eighth of the GPU and a worker freeing what an untimed call allocated (without those, its
# waiting work met the others at 79 GiB in use; docs/MEASUREMENTS.md); not on memory the host
# shares either
TIMED_FIRST_GPU_BYTES = 64 << 30


def queue_for(plan: dict[str, list[str]], mine: list[Check], by_layer: bool = False) -> list:
    """The requests for `plan`'s grading processes, longest first: (exercise, layers, the check
    ids it grades or None for all of them). One per exercise for its CPU layers (a process
    grades one exercise at once: each has its own workers), or, `by_layer`, one per layer; one
    per gpu check. How long: the seconds its exercise's layers took (Exercise.seconds), else
    CHECK_SECONDS per check."""
    def cost(request: tuple) -> float:
        exercise, layers, ids = request
        measured = getattr(EXERCISES.get(exercise), "seconds", {}) if ids is None else {}
        return sum(measured[layer] if layer in measured else
                   sum(CHECK_SECONDS.get(c.layer, 1.0) for c in mine if c.exercise == exercise
                       and c.layer == layer and (ids is None or c.id in ids))
                   for layer in layers)

    queue = [(e, cpu, None) for e, ls in plan.items()
             if (cpu := [x for x in ls if x != GPU_SPLIT])]
    if by_layer:
        queue = [(e, [layer], None) for e, layers, _ in queue for layer in layers]
    queue += [(e, [GPU_SPLIT], [c.id]) for e, ls in plan.items() if GPU_SPLIT in ls
              for c in mine if c.exercise == e and c.layer == GPU_SPLIT]
    return sorted(queue, key=lambda r: -cost(r))


def split_plan(exercises: list[str], layers: list[str], checks: dict[str, Check], cuda: bool,
               target=None) -> dict[str, list[str]]:
    """{exercise: the layers a parallel grading process grades for it}: its CPU layers, and
    its gpu layer when the machine has CUDA and cores to spare (`may_overlap`), no grading
    target is asked for (its evidence is gathered in grader.run's process) and none of the
    exercise's gpu checks needs the GPU to itself (Check.gpu_alone). The option `gpu_split`
    decides instead of the cores. Exercises with nothing to split are left out."""
    wanted = options.current().gpu_split
    gpu = (GPU_SPLIT in layers and cuda and target is None
           and (may_overlap() if wanted is None else wanted))
    plan = {}
    for e in exercises:
        mine = [c for c in checks.values() if c.exercise == e]
        split = [layer for layer in CPU_LAYERS if layer in layers]
        if gpu and not any(c.layer == GPU_SPLIT and c.gpu_alone for c in mine):
            split.append(GPU_SPLIT)
        split = [layer for layer in split if any(c.layer == layer for c in mine)]
        if split:
            plan[e] = split
    return plan


def jobs_for(exercises: list[str], layers: list[str]) -> int:
    """How many grading processes: the option `jobs` (GRADER_JOBS) if set, else one per core
    (at most MAX_JOBS), one when memory is short (grader.sandbox.budget) or when there is
    nothing to split."""
    splittable = [layer for layer in layers if layer in (*CPU_LAYERS, GPU_SPLIT)]
    if len(exercises) < 2 or not splittable:
        return 1
    wanted = options.current().jobs
    if wanted is not None:
        return max(1, min(wanted, len(exercises)))
    if budget.one_exercise_at_a_time():
        return 1
    return max(1, min(usable_cores(), MAX_JOBS, len(exercises)))


def usable_cores() -> int:
    """The cores this process may run on (its affinity: batch's --cpus, Slurm's allotment),
    no more than its cgroup's CPU limit, which the affinity mask does not show (Gradescope:
    0.5); at least 1."""
    cores = len(os.sched_getaffinity(0))
    quota = cpu_quota()
    if quota is not None:
        cores = min(cores, max(1, int(quota)))
    return max(1, cores)


def cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The CPUs this process's cgroup may use (v2 cpu.max, v1 cpu.cfs_quota_us / period);
    None when there is no limit or it cannot be read."""
    try:
        text = (root / "cpu.max").read_text().split()
        if text and text[0] != "max":
            return int(text[0]) / int(text[1])
    except (OSError, ValueError, IndexError):
        pass
    for folder in (root / "cpu", root / "cpu,cpuacct"):
        try:
            quota = int((folder / "cpu.cfs_quota_us").read_text())
            period = int((folder / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            continue
        if quota > 0 and period > 0:
            return quota / period
    return None


def divide(plan: dict[str, list[str]]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """`plan` as (its CPU layers, its gpu layer): two plans for two sets of grading processes."""
    cpu = {e: [x for x in ls if x != GPU_SPLIT] for e, ls in plan.items()}
    gpu = {e: [GPU_SPLIT] for e, ls in plan.items() if GPU_SPLIT in ls}
    return {e: ls for e, ls in cpu.items() if ls}, gpu


def gpu_jobs(requests: int, cpu_jobs: int) -> int:
    """Grading processes for the untimed gpu checks: one per check (`requests`), as many as the
    cores left by the CPU layers' `cpu_jobs` allow, at most MAX_GPU_JOBS. Their time is mostly
    Triton compiling and waiting on the GPU, and the longest check bounds them: a check that
    waits for a process adds its whole time (`jobs` sets it)."""
    wanted = options.current().jobs
    if wanted is not None:
        return max(1, min(requests, wanted))
    cores = usable_cores()
    return max(1, min(requests, cores - cpu_jobs, MAX_GPU_JOBS))


def after_timing_jobs(cpu_jobs: int, gpu_jobs: int) -> int:
    """Grading processes for the CPU layers once the timed checks are over (timed_first): no
    launching thread to keep a core for, so the cores the gpu checks' `gpu_jobs` leave, at
    most MAX_JOBS, never fewer than `cpu_jobs` (the option `jobs`: `cpu_jobs`)."""
    if options.current().jobs is not None:
        return cpu_jobs
    cores = usable_cores()
    return max(cpu_jobs, min(MAX_JOBS, cores - gpu_jobs))


def beside_jobs(gpu_jobs: int) -> int:
    """Grading processes for the CPU layers while `gpu_jobs` grade the untimed gpu checks and,
    after them, the timed checks run: a quarter of the cores, at most four, so the timed
    checks' launching thread keeps a core of its own (the option `jobs` sets both)."""
    wanted = options.current().jobs
    if wanted is not None:
        return max(1, wanted)
    return max(1, min(4, usable_cores() // 4, gpu_jobs))


def may_overlap() -> bool:
    """Whether the CPU layers may run beside the GPU layers: only with cores to spare (the timed
    checks launch kernels from one Python thread, which a busy CPU would slow); the option
    `overlap` decides instead."""
    wanted = options.current().overlap
    return usable_cores() >= OVERLAP_CORES if wanted is None else wanted


def timed_first(gpu_plan: dict, here: list[str], layers: list[str], gpu_bytes: int,
                unified: bool = False, target=None) -> bool:
    """Whether grader.run times first and checks after: the perf checks (and every check that
    needs the GPU alone) in its own process, with nothing else running, their timed outputs'
    verification and their gated calls held back (grader.fixtures `after_timing`); then, with the
    GPU shared, the untimed gpu checks' and the CPU layers' grading processes, beside that
    held-back work. Not even the CPU layers go beside the timing: with four of their processes
    on a 16-core H100 box, flash_fwd's recorded calls at N = 4K read 1.07 to 1.74 ms against
    0.84 to 0.88 alone (docs/MEASUREMENTS.md). Only where the perf layer runs here and the
    gpu layer's untimed checks do not (split off into `gpu_plan`, or the gpu layer not among
    the `layers` graded: a grade of the perf layer alone, whose outputs are then verified side
    by side after the timing, not each in turn), and the GPU has memory of its own for all of
    it (TIMED_FIRST_GPU_BYTES, not `unified` with the host's); the option `timed_first`
    (--timed-first, --no-timed-first) decides instead of the memory. A perf-layer grade with nothing split off keeps checking
    each check in turn where memory keeps one exercise's workers alive at a time (the held-back
    work would start them again beside another's) or a grading `target` gathers evidence (its
    record is written by one check at a time)."""
    if "perf" not in here:
        return False
    if not gpu_plan and (GPU_SPLIT in layers or target is not None
                         or budget.one_exercise_at_a_time()):
        return False
    wanted = options.current().timed_first
    if wanted is not None:
        return wanted
    return gpu_bytes >= TIMED_FIRST_GPU_BYTES and not unified


def timed_first_note(gpu_jobs: int, cpu_jobs: int, gpu_plan: dict, cpu_plan: dict) -> str:
    """The report's note on a grade that timed first: what ran after the timing, and where."""
    held_back = "the verification of every timed output and the timed checks' gated calls"
    after = []
    if gpu_plan:
        after.append(f"the gpu layer's untimed checks ran in {gpu_jobs} grading processes side by side")
    if cpu_plan:
        after.append(f"the CPU layers in {cpu_jobs}" if gpu_plan
                     else f"the CPU layers ran in {cpu_jobs} grading processes")
    if not after:
        return (f"The timed checks ran first, with the GPU and the CPUs alone; {held_back} came "
                f"after all of them.")
    return (f"The timed checks ran first, with the GPU and the CPUs alone; then "
            f"{', and '.join(after)}, beside {held_back}.")
