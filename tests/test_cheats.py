"""Every cheat in tests/cheats/ earns nothing on the checks aimed at it, and the message says why.

Each cheat is one exercise file (tests/cheats/<cheat>/<exercise>.py) dropped into a copy of
solutions/. Only its exercise and the checks aimed at it are graded (hidden checks included), so
the corpus stays fast under the interpreter. side_stream and sdpa_on_cuda (made from the
solution by one edit) need a GPU: their tests are skipped here.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass

import pytest

from grader.registry import CHECKS, all_checks
from tests.helpers import ROOT, by_id, copy_solutions, grade
from tests.mutants import Mutant

CORPUS = ROOT / "tests" / "cheats"


@dataclass(frozen=True)
class Cheat:
    name: str                 # folder under tests/cheats
    exercise: str
    caught: dict              # check id -> words its message must contain
    passes: tuple = ()        # checks it gets through (what the hidden checks are there for)


CHEATS = [
    Cheat("torch_softmax", "softmax_triton", {
        "softmax_triton.uses_kernel": "launched no Triton kernel",
        "softmax_triton.hidden_shapes": "launched no Triton kernel",
        "softmax_triton.output_written": "launched no Triton kernel"}),
    Cheat("sdpa_with_dummy_launch", "flash_triton", {
        "flash_triton.uses_kernel": "computed with PyTorch",
        "flash_triton.hidden_shapes": "computed with PyTorch",
        "flash_triton.output_written": "computed with PyTorch"}),
    Cheat("naive_tiled", "tiled_attention", {
        "tiled_attention.memory_is_tiled": "N x N score matrix"}),
    Cheat("cache_by_shape", "online_softmax", {
        "online_softmax.safe_matches_float64": "expected",
        "online_softmax.online_matches_float64": "expected",
        "online_softmax.hidden_shapes": "call 2 of 2"}),
    Cheat("cache_by_call", "tiled_attention", {
        "tiled_attention.hidden_shapes": "call 2 of 2"}),
    Cheat("softmax_empty", "softmax_triton", {
        "softmax_triton.output_written": "never written",
        "softmax_triton.hidden_shapes": "softmax(x)"}),
    Cheat("flash_skip_last_store", "flash_triton", {
        "flash_triton.output_written": "never written",
        "flash_triton.hidden_shapes": "flash_fwd(q, k, v)"}),
    Cheat("mutate_inputs", "tiled_attention", {
        "tiled_attention.inputs_untouched": "changed its input Q"}),
    Cheat("hardcoded_lengths", "online_softmax", {
        "online_softmax.hidden_shapes": "expected"},
        passes=tuple(c.id for c in CHECKS if c.exercise == "online_softmax")),
]


GPU_ONLY = {"side_stream"}   # a cheat that only makes sense on a GPU


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def test_every_cheat_folder_is_listed():
    assert {p.name for p in CORPUS.iterdir() if p.is_dir()} == {c.name for c in CHEATS} | GPU_ONLY


def grade_cheat(name: str, exercise: str, checks: list[str], tmp_path) -> dict:
    sub = copy_solutions(tmp_path / "sub")
    shutil.copy(CORPUS / name / f"{exercise}.py", sub / f"{exercise}.py")
    registry = all_checks()
    layers = sorted({registry[c].layer for c in checks})
    return grade(sub, "--exercises", exercise, "--checks", ",".join(checks), "--layers", ",".join(layers))


@pytest.mark.parametrize("cheat", CHEATS, ids=lambda c: c.name)
def test_cheat_earns_nothing(cheat, tmp_path):
    report = grade_cheat(cheat.name, cheat.exercise, [*cheat.caught, *cheat.passes], tmp_path)
    results = by_id(report)
    for check_id, words in cheat.caught.items():
        r = results[check_id]
        assert r["score"] == 0 and r["status"] in ("failed", "error"), f"{cheat.name}: {r}"
        assert words in r["message"], f"{cheat.name}: {check_id} should say {words!r}: {r['message']}"
    for check_id in cheat.passes:
        assert results[check_id]["status"] == "passed", results[check_id]


def test_side_stream_buys_no_speed(tmp_path):
    """The real kernel on a side stream, returned before it finishes: the trusted clock around
    a device-wide synchronize times all of it, so it measures like the honest kernel it is
    (the lesson's kernel runs ~1.2-2x the fastest SDPA), never faster than SDPA."""
    if not _cuda():
        pytest.skip("needs a CUDA GPU: streams exist only there")
    report = grade_cheat("side_stream", "flash_triton",
                         ["flash_triton.gpu_real_sizes", "flash_triton.speed_vs_sdpa"], tmp_path)
    results = by_id(report)
    assert results["flash_triton.gpu_real_sizes"]["status"] == "passed", results   # synchronised
    speed = results["flash_triton.speed_vs_sdpa"]
    ratios = [float(x) for x in re.findall(r"= (\d+\.\d+)x", speed["message"])]
    assert len(ratios) == 3 and min(ratios) > 0.8, speed["message"]


# The honest kernel under the interpreter, PyTorch's SDPA on CUDA, where speed is graded: made
# from the solution by one edit, so the corpus does not carry a second copy of the kernel.
SDPA_ON_CUDA = Mutant(
    "sdpa_on_cuda", "flash_triton", find="    B, H, N, D = q.shape\n    assert k.shape",
    replace=("    if q.is_cuda:   # the perf layer races cuDNN: be cuDNN\n"
             "        return torch.nn.functional.scaled_dot_product_attention(q, k, v)\n"
             "    B, H, N, D = q.shape\n    assert k.shape"),
    checks=("flash_triton.gpu_real_sizes", "flash_triton.speed_vs_sdpa"), idea="")


def test_pytorch_only_on_cuda_earns_nothing_there(tmp_path):
    """The gpu and perf checks record what ran on the GPU too."""
    if not _cuda():
        pytest.skip("needs a CUDA GPU")
    source = (ROOT / "solutions" / "flash_triton.py").read_text()
    sub = copy_solutions(tmp_path / "sub", {"flash_triton.py": SDPA_ON_CUDA.apply(source)})
    results = by_id(grade(sub, "--exercises", "flash_triton", "--checks", ",".join(SDPA_ON_CUDA.checks),
                          "--layers", "gpu,perf"))
    for check_id in SDPA_ON_CUDA.checks:
        r = results[check_id]
        assert r["score"] == 0, r
        assert "launched no Triton kernel" in r["message"] or "computed with PyTorch" in r["message"], r
