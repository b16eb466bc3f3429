"""Every cheat earns nothing on its whole exercise (issues 9 and 11).

Each cheat is one exercise file (tests/exercises/<exercise>/cheats/<cheat>/<exercise>.py, with an
expect.json: tests.cases.Cheat) dropped into a copy of solutions/, graded on its exercise only, on
every CPU layer the exercise has, hidden checks included. Every check scores 0 (for the two cheats
whose other answers are computed by their own code in the graded call, hard-coded lengths and a
cache by shape: the checks built to catch them, `Cheat.zero_on`). A cheat the static audit must
flag says so in a message that names the file and the line; one marked `without_audit` is graded
with the audit switched off, so what catches it is a run-time defence (provenance's replay,
grader.judge.evidence.provenance). A cheat that computes right answers and forges only the evidence of
how (a read log rewritten, issue 53) names in `earns_only` the checks its answers earn: the
forgery pays nothing, so every other check scores 0. side_stream and sdpa_on_cuda need a
GPU: their tests are skipped here, and tools/gpu_cheats.py grades every cheat marked "gpu" on the
GPU layers.
"""

from __future__ import annotations

import re

import pytest

from grader.registry import all_checks
from tests.cases import Cheat, Mutant, case, cases, cheats, exercise_of
from tests.corpus import ROOT, folder_files, grade_exercise, lines, checks_of
from tests.helpers import by_id, copy_solutions, grade

CHEATS = cheats()


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def test_every_cheat_folder_is_listed():
    assert {p.name for p in cases("cheats")} == {c.name for c in CHEATS}
    for c in CHEATS:
        assert c.exercise == exercise_of(c.folder), c
        assert sorted(p.name for p in c.folder.glob("*.py")) == [f"{c.exercise}.py"], c
        if c.zero_on != "all":
            assert all(all_checks()[i].exercise == c.exercise for i in c.zero_on), c
        assert not (c.earns_only and c.zero_on != "all"), f"{c.name}: earns_only needs zero_on all"
        assert all(all_checks()[i].exercise == c.exercise and not all_checks()[i].advice
                   for i in c.earns_only), c
        assert c.cpu or c.gpu, f"{c.name}: graded nowhere (neither cpu nor gpu)"


@pytest.mark.parametrize("cheat", [c for c in CHEATS if c.cpu], ids=lambda c: c.name)
def test_cheat_earns_nothing(cheat: Cheat, tmp_path):
    report = grade_exercise(tmp_path, cheat.exercise, folder_files(cheat.folder),
                            audit=not cheat.without_audit)
    ran = checks_of(report, cheat.exercise)
    assert ran, f"{cheat.name}: no check of {cheat.exercise} ran"
    graded = [t for t in ran if (cheat.zero_on == "all" and t["name"] not in cheat.earns_only)
              or t["name"] in cheat.zero_on]
    assert graded, f"{cheat.name}: no check of {cheat.zero_on} ran"
    earned = [t for t in graded if t["score"] > 0]
    assert earned == [], (f"{cheat.name} earned points on {cheat.exercise}:\n{lines(earned)}"
                          f"\nall checks:\n{lines(ran)}")
    failed = [t for t in ran if t["status"] != "passed"]
    said = "\n".join(t["message"] for t in failed)
    if cheat.says:
        assert cheat.says.lower() in said.lower(), (
            f"{cheat.name}: no failing check says {cheat.says!r}:\n{lines(failed)}")
    if cheat.audit:
        # "flash_triton.py:12", "flash_triton.py, line 12", ...
        where = re.compile(rf"{cheat.exercise}\.py\D{{1,8}}\d+")
        assert where.search(said), (
            f"{cheat.name}: the static audit should flag it, naming {cheat.exercise}.py and the "
            f"line:\n{lines(failed)}")


def test_side_stream_buys_no_speed(tmp_path):
    """The real kernel on a side stream, returned before it finishes. Read after a device-wide
    synchronize it is right (gpu_real_sizes); the timed calls' checksums are read on the caller's
    stream, as the next line of PyTorch would read them, where it is not ready: a race, and no
    perf points, with a message that says so (tools/gpu_cheats.py grades it so on a GPU)."""
    if not _cuda():
        pytest.skip("needs a CUDA GPU: streams exist only there")
    sub = copy_solutions(tmp_path / "sub", folder_files(case("cheats", "side_stream")))
    results = by_id(grade(sub, "--exercises", "flash_triton", "--layers", "gpu,perf", "--checks",
                          "flash_triton.gpu_real_sizes,flash_triton.speed_vs_sdpa"))
    assert results["flash_triton.gpu_real_sizes"]["status"] == "passed", results   # synchronised
    speed = results["flash_triton.speed_vs_sdpa"]
    assert speed["score"] == 0 and "caller's stream" in speed["message"], speed


# The honest kernel under the interpreter, PyTorch's SDPA on CUDA, where speed is graded: made
# from the solution by one edit, so the corpus does not carry a second copy of the kernel.
SDPA_ON_CUDA = Mutant(
    "sdpa_on_cuda", "flash_triton", find="    B, H, N, D = q.shape\n    assert k.shape",
    replace=("    if q.is_cuda:   # the perf layer races cuDNN: be cuDNN\n"
             "        return torch.nn.functional.scaled_dot_product_attention(q, k, v)\n"
             "    B, H, N, D = q.shape\n    assert k.shape"),
    checks=("flash_triton.gpu_real_sizes", "flash_triton.speed_vs_sdpa"), idea="")


# Issue 18, "behaviour that depends on being watched", on the perf layer, and issue 53, "timed
# calls judged by what ran": the honest kernel on every call it takes for an untimed one; on a
# call with the key of the call before (the perf layer's repeated, timed calls) PyTorch's answer,
# computed with the trace off and copied into the output by a Triton kernel. Every answer is
# right; no frame inspection, so the static audit sees nothing. Before timed calls were replayed
# the flash_triton one earned speed_vs_sdpa 5/5 on an H200 (docs/MEASUREMENTS.md), and the
# bandwidth-bound exercises' timed calls were judged by their checksums alone;
# tools/gpu_cheats.py grades them, and only the checks that time calls owe 0.
_BEHIND_LAUNCH = """
_T = torch
_seen = [None]


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def _fast(like, compute):
    answer = torch.empty_like(like)
    with _T._C._DisableTorchDispatch():
        answer.copy_(compute())
    o = torch.empty_like(like)
    n = o.numel()
    _copy[(triton.cdiv(n, 1024),)](answer, o, n, BLOCK=1024)
    return o


"""


def timed_behind_launch(name: str, exercise: str, signature: str, first_line: str, key: str,
                        like: str, answer: str, checks: tuple) -> Mutant:
    """The solution's `def <signature>` whose body, before `first_line`, answers a timed call
    with `answer` (an expression of the arguments) shaped like `like`, behind a copy launch."""
    return Mutant(
        name, exercise, find=first_line,
        replace=(f"    key = {key}\n"
                 f"    timed, _seen[0] = key == _seen[0], key\n"
                 f"    if timed and {like}.is_cuda:\n"
                 f"        return _fast({like}, lambda: {answer})\n{first_line}"),
        also=((f"\ndef {signature}", _BEHIND_LAUNCH + f"def {signature}"),),
        checks=checks, idea="")


TIMED_SDPA = timed_behind_launch(
    "timed_sdpa_behind_launch", "flash_triton",
    "flash_fwd(q, k, v, BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3):",
    "    B, H, N, D = q.shape\n    assert k.shape", "(tuple(q.shape), q.dtype, tuple(k.shape))",
    "q", "torch.nn.functional.scaled_dot_product_attention(q, k, v)",
    ("flash_triton.speed_vs_sdpa", "flash_triton.memory_flat"))
TIMED_BANDWIDTH = (
    timed_behind_launch(
        "timed_torch_softmax_behind_launch", "softmax_triton", "softmax(x: torch.Tensor) -> torch.Tensor:",
        "    n_rows, n_cols = x.shape\n    if x.stride(1)", "(tuple(x.shape), x.dtype)", "x",
        "torch.softmax(x, dim=1)", ("softmax_triton.bandwidth",)),
    timed_behind_launch(
        "timed_torch_softmax_long_behind_launch", "softmax_long",
        "softmax(x: torch.Tensor, BLOCK: int | None = None, num_warps: int | None = None) -> torch.Tensor:",
        "    n_rows, n_cols = x.shape\n    if x.stride(1)", "(tuple(x.shape), x.dtype, BLOCK)", "x",
        "torch.softmax(x, dim=1)", ("softmax_long.bandwidth",)),
    timed_behind_launch(
        "timed_sdpa_decode_behind_launch", "flash_decode",
        "flash_decode(q, k_cache, v_cache, seq_lens, num_splits=None, BLOCK_N=None, num_warps=None,",
        "    B, Hq, D = q.shape\n    Hkv, L_max", "(tuple(q.shape), tuple(k_cache.shape), num_splits)", "q",
        "torch.nn.functional.scaled_dot_product_attention("
        "q[:, :, None], k_cache, v_cache, enable_gqa=True, attn_mask=(torch.arange(k_cache.shape[2], "
        "device=q.device)[None, :] < seq_lens.to(q.device)[:, None])[:, None, None, :])[:, :, 0]",
        ("flash_decode.bandwidth", "flash_decode.splits_speedup")),
)



def scores_kept(name: str, allocation: str, checks: tuple) -> Mutant:
    """The solution's flash_fwd, right to the last bit, that also stores every weight in an
    N x N buffer the wrapper makes with `allocation` (16 GiB at N = 16K): the memory the
    lesson's tiling avoids. memory_flat counts the memory of a replayed timed call in the replay
    worker, which runs only the kernels (issue 53)."""
    return Mutant(
        name, "flash_triton",
        find="def _flash_fwd(Q, K, V, O, N, stride_bh, stride_n, scale,",
        replace="def _flash_fwd(Q, K, V, O, S, N, stride_bh, stride_n, scale,",
        also=(("        p = tl.exp(s - m_new[:, None])\n",
               "        p = tl.exp(s - m_new[:, None])\n"
               "        tl.store(S + pid_bh.to(tl.int64) * N * N + rows[:, None] * N + cols[None, :],\n"
               "                 p.to(S.dtype.element_ty), mask=(rows[:, None] < N) & (cols[None, :] < N))\n"),
              ("    _flash_fwd[grid](q, k, v, o, N,", allocation + "    _flash_fwd[grid](q, k, v, o, scores, N,"),
              ("                     num_warps=num_warps, num_stages=num_stages)\n    return o",
               "                     num_warps=num_warps, num_stages=num_stages)\n    del scores\n"
               "    if q.is_cuda:   # the old count (the worker's own CUDA peak), wiped\n"
               "        torch.cuda.reset_peak_memory_stats()\n    return o")),
        checks=checks, idea="")


SCORES_KEPT = (
    # in the recorded steps: the replay allocates the buffer too, and memory_flat gives 0
    scores_kept("scores_in_memory",
                "    scores = torch.empty(B * H, N, N, dtype=q.dtype, device=q.device)\n",
                ("flash_triton.memory_flat",)),
    # kept out of the record (dispatch off): the replay has no such memory and fails
    scores_kept("scores_untraced",
                "    with torch._C._DisableTorchDispatch():\n"
                "        scores = torch.empty(B * H, N, N, dtype=q.dtype, device=q.device)\n",
                ("flash_triton.memory_flat", "flash_triton.speed_vs_sdpa")),
)

def test_pytorch_only_on_cuda_earns_nothing_there(tmp_path):
    """The gpu and perf checks record what ran on the GPU too: nothing on either layer."""
    if not _cuda():
        pytest.skip("needs a CUDA GPU")
    source = (ROOT / "solutions" / "flash_triton.py").read_text()
    sub = copy_solutions(tmp_path / "sub", {"flash_triton.py": SDPA_ON_CUDA.apply(source)})
    report = grade(sub, "--exercises", "flash_triton", "--layers", "gpu,perf")
    gpu = [t for t in checks_of(report, "flash_triton") if t["layer"] in ("gpu", "perf")]
    assert gpu and all(t["score"] == 0 for t in gpu), lines(gpu)


def test_a_cheat_earns_nothing_beside_other_exercises(tmp_path):
    """peak_reset graded as `make grade` grades it, its CPU layers in parallel with other
    exercises' (two cheats of Triton exercises beside it, run by the interpreter): ragged_sizes'
    memory gate once let its N x N scores through there (3 grades of 3 in one run, 1 of 3 in
    another), with 0.1-1.2 MB to spare at N = 1000, d = 64 (docs/MEASUREMENTS.md); alone it
    earned nothing."""
    files = {}
    for exercise, name in (("tiled_attention", "peak_reset"),
                           ("flash_triton", "sdpa_with_dummy_launch"),
                           ("softmax_triton", "numpy_return")):
        files.update(folder_files(case("cheats", name)))
    sub = copy_solutions(tmp_path / "sub", files)
    for draw in range(3):   # the old gate let it through in about one grade of three here
        report = grade(sub, "--exercises", "tiled_attention,flash_triton,softmax_triton",
                       "--layers", "cpu,adversarial,interp", json_path=tmp_path / f"{draw}.json")
        ran = checks_of(report, "tiled_attention")
        earned = [t for t in ran if t["score"] > 0]
        assert ran and earned == [], (draw, lines(earned))
