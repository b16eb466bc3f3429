"""The order in which grader.parallel hands out its requests: the longest first (LPT scheduling),
so the last to finish is not a long one begun late. How long a request takes: the seconds its
exercise's layers took in a grade of the solutions on a GPU box (Exercise.seconds in each
exercise's rows.py), else CHECK_SECONDS per check. By the count of checks alone, flash_decode's
interp layer (29 s) began eighth of the CPU layers' requests and ended a grade 4 s after
everything else (docs/MEASUREMENTS.md)."""

from __future__ import annotations

from grader.registry import EXERCISES, Check

GPU_SPLIT = "gpu"   # the untimed GPU layer, split only on a CUDA machine with cores to spare
# per check where an exercise gives no seconds: interp is slow, a gpu check compiles kernels
CHECK_SECONDS = {"cpu": 0.3, "adversarial": 1.0, "interp": 3.0, "gpu": 20.0}


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
