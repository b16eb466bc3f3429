"""The registry's row types: an exercise, a layer, a check. Plain data; grader.registry gathers
the rows from each exercise folder (grader/exercises/<name>/rows.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


# Check.evidence of an overflow check: NaN or inf in the answer; a finite wrong answer is the
# correctness checks' business
OVERFLOW = ("nan", "inf")


@dataclass(frozen=True)
class Band:
    """How a graded-by-degree measurement becomes credit (grader.judge.perf.verdicts): full credit at
    `full` or better, none at `zero` or worse, linear in between, either way round: a time
    ratio (lower is better: full < zero) or a fraction of a ceiling (higher is better)."""
    full: float
    zero: float
    what: str = ""            # the measurement, for the report: "time / fastest SDPA time"


@dataclass(frozen=True)
class Exercise:
    name: str
    title: str
    needs: frozenset          # Python packages the exercise's worker needs: numpy, torch, triton
    mode: str                 # worker mode for the cpu/adversarial/interp layers
    track: str = "core"       # "core": the 100 public points; "extension": points of its own
    # The kernel-use gate (grader.fixtures.ProvingSubmission, judge/evidence/kernel_use.py): every graded function
    # that must compute with the student's Triton kernels, as {function: (call, launch, work)}
    # for the messages, and the torch ops its wrapper may run beyond allocations, views and copies.
    kernels: dict = dataclasses.field(default_factory=dict)
    extra_ops: frozenset = frozenset()
    # The static audit's rules (judge/source/audit.py): "numpy" (the general rules), "triton" (the whole
    # file under the Triton rules), "mixed" (a NumPy part, and the code `kernels` reaches under
    # the Triton rules).
    audit: str = "numpy"
    order: int = 100          # its place in the lesson: reports list exercises in this order
    # The perf checks' thresholds, as data (grader.judge.perf.verdicts): {measure: Band}, and where a
    # device profile needs others, {profile key: {measure: Band}} (grader.judge.machine.devices).
    bands: dict = dataclasses.field(default_factory=dict)
    device_bands: dict = dataclasses.field(default_factory=dict)
    # The functions the perf checks time, where not all of `kernels` (a given wrapper that calls
    # them is not timed): the perf checks are not run while all of them are still the stub
    # (grader.plugin.stubbed).
    timed: tuple = ()
    # Seconds each CPU layer of the exercise took in a full grade of the solutions on a GPU box
    # ({layer: seconds}): grader.parallel hands the longest request out first, so the last one
    # to finish is not a long one begun late. A layer not given is weighed by its checks.
    seconds: dict = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class Layer:
    name: str
    title: str
    needs: frozenset          # what the machine must have: torch, triton, cuda


@dataclass(frozen=True)
class Check:
    id: str                   # "<exercise>.<what>"
    layer: str
    points: float
    title: str
    hint: str                 # the lesson idea to revisit when it fails
    hidden: bool = False
    # ids of more specific checks whose idea explains this one's failure: when one of them fails
    # too, the report lists this check under it ("probably the same cause"), not as its own lead
    follows: tuple = ()
    # a gpu-layer check that needs the GPU to itself (it judges free memory or times): never
    # graded beside another grading process (grader.parallel); every perf check is such a check
    gpu_alone: bool = False
    # the kinds of wrong answer that show this check's own idea (CheckFailed.kind, from
    # compare.assert_close): ("nan", "inf") for an overflow check. Any other wrong answer is
    # the correctness checks' business: the check fails as secondary, saying the answer was
    # wrong (compare.as_secondary). None: every failure is the check's own.
    evidence: tuple | None = None
    # advice, not points: a lesson idea (one pass, key tiles, causal skipping) whose only evidence
    # is a record the student's process could rewrite (docs/SECURITY.md, "What a verdict may rest
    # on"). Worth 0 points; its failure is reported as advice (Result status "advice"), never
    # leads a report and costs nothing. The registry refuses an advice check with points.
    advice: bool = False

    @property
    def exercise(self) -> str:
        return self.id.split(".", 1)[0]
