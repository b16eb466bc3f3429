"""Grades that hold still (issue 23): a correct float16 kernel whose rounding differs from the
solution's gets the same score on every fresh draw of the inputs.

The comparisons behind it: flash-attention's rule for attention outputs and gradients
(grader/judge/answers/compare.py, `baseline=`: the error may be a multiple of what plain PyTorch in
float16 gets on the very same inputs, so it moves with the draw instead of sitting at one fixed
tolerance that a correct kernel lands on either side of), and the float16 tolerance for softmax.
One float16 variant of each Triton extension exercise (the variant folders marked `steady`,
tests.cases.steady_variants), all in one submission:

  - flash_decode: q . k element-wise in float16 (products and sums rounded to float16, as
    public one-row decode kernels compute it);
  - flash_backward: D = rowsum(dO * O) summed in float16;
  - softmax_long: x - max rounded to float16 before the exp.

The submission is graded REPEATS times (default 10, the issue's number; STEADY_REPEATS to
change it) on the interp layer, each grade with fresh seeds (grader.fixtures: a seed per check
per run), without the provenance replay: a replay compares a kernel with itself and cannot move
with the draw (the variants' own test, tests/test_variants.py, grades them with it). The GPU's
rounding (float16 sums in a tree of adds) is graded by tools/gpu_repeat.py on a CUDA machine.
"""

from __future__ import annotations

import os

import pytest

from tests.cases import folder_files, mutants, steady_variants
from tests.corpus import CPU, checks_of, exercise_score, lines, losing
from tests.helpers import SOLUTIONS, by_id, copy_solutions, grade
from tests.packs import Packs

REPEATS = int(os.environ.get("STEADY_REPEATS", "10"))
VARIANTS = steady_variants()


@pytest.mark.parametrize("draw", range(REPEATS))
def test_fp16_variants_score_the_same_every_draw(tmp_path, draw):
    """One draw per test (each grade draws its own seeds), so the draws spread over pytest's
    processes; every draw must give each variant full marks, which is what the same score on
    every draw means for a correct kernel."""
    files = {}
    for folder in VARIANTS.values():
        files.update(folder_files(folder))
    sub = copy_solutions(tmp_path / "sub", files)
    report = grade(sub, "--exercises", ",".join(VARIANTS), "--layers", "interp",
                   "--no-hidden", replay=False, json_path=tmp_path / f"{draw}.json")
    scores, lost = {}, []
    for exercise in VARIANTS:
        assert checks_of(report, exercise), f"no interp check of {exercise} ran"
        scores[VARIANTS[exercise].name] = exercise_score(report, exercise)
        lost += losing(report, exercise)
    assert not lost, (f"draw {draw} of {REPEATS}: {scores}; each variant is correct, so every "
                      f"draw must give full marks:\n{lines(lost)}")



# (exercise, mutant, check, its score in every draw): checks whose loss for a known mistake once
# depended on the draw, found in a batch and a grade alone of one submission, and in three
# grades of every mutant on the CPU layers with the hidden checks (tools/mutant_repeat.py).
# Each now draws inputs that show the mistake every time (0), or, where the mistake is another
# check's idea, never (full marks: softmax_long's judging.max_in_first_block).
DRAW_DEPENDENT = [
    ("online_softmax", "no_max_subtraction", "online_softmax.hidden_shapes", 0.0),
    ("flash_decode", "merge_empty_nan", "flash_decode.hidden_merge", 0.0),
    ("flash_decode", "kernel_merge_no_guard", "flash_decode.hidden_shapes", 0.0),
    ("flash_decode", "no_scale", "flash_decode.large_scores", 2.0),
    ("softmax_long", "no_rescale", "softmax_long.all_negative_rows", 2.0),
    ("flash_triton", "no_max_subtraction", "flash_triton.matches_reference", 5.0),
    ("softmax_long", "last_block_mask_off_by_one", "softmax_long.matches_float64", 3.0),
    ("softmax_long", "last_block_mask_off_by_one", "softmax_long.hidden_shapes", 2.0),
    ("softmax_long", "last_block_mask_off_by_one", "softmax_long.uses_kernel", 1.0),
    ("softmax_long", "last_block_mask_off_by_one", "softmax_long.output_written", 1.0),
    ("softmax_long", "last_block_mask_off_by_one", "softmax_long.all_negative_rows", 2.0),
    ("softmax_long", "no_rescale", "softmax_long.output_written", 1.0),
    ("io_model", "elements_instead_of_bytes", "io_model.hidden_shapes", 0.0),
    ("flash_decode", "no_max_subtraction", "flash_decode.max_in_last_split", 3.0),
]


DRAWS = 2   # grades of each mistake, fresh seeds each


def _id(mistake) -> str:
    exercise, name, draw = mistake
    return f"{exercise}-{name}-draw{draw}"


def _scores(mistake) -> dict[str, float]:
    exercise, name, _ = mistake
    return {check: score for e, m, check, score in DRAW_DEPENDENT if (e, m) == (exercise, name)}


def _files(mistake) -> dict[str, str]:
    exercise, name, _ = mistake
    mutant = next(m for m in mutants() if m.exercise == exercise and m.name == name)
    return {f"{exercise}.py": mutant.apply((SOLUTIONS / f"{exercise}.py").read_text())}


# one case a (mistake, draw); its checks alone graded, mistakes of other exercises beside it
# (tests.packs), so each draw of a mistake is a grade of its own with fresh seeds
MISTAKES = [(e, m, draw) for e, m in dict.fromkeys((e, m) for e, m, _, _ in DRAW_DEPENDENT)
            for draw in range(DRAWS)]
STEADY = Packs(MISTAKES, name=_id, exercise=lambda m: m[0], files=_files,
               layers=lambda m: ",".join(CPU), replay=False, checks=lambda m: list(_scores(m)))
PACKS = {"test_a_mistake_scores_the_same_every_draw": STEADY}   # tests.conftest


@pytest.mark.parametrize("mistake", MISTAKES, ids=_id)
def test_a_mistake_scores_the_same_every_draw(mistake, request):
    """The other side of the variants above: a mistake's points may not move with the draw
    either. Each of DRAWS grades of the mutant's checks gives each check its one score."""
    got = by_id(STEADY.report(mistake, request, "mistake"))
    for check, score in _scores(mistake).items():
        assert got[check]["score"] == score, (_id(mistake), check, got[check]["message"])
