"""Provenance of the perf layer's timed calls, on the CPU (softmax_triton under the interpreter).

The perf layer times R calls per request (grader.judge.perf.timed_requests.Requests) and checks
their checksums against the reference, so a timed call that computed its answer with PyTorch
instead of the kernel would pass on correctness alone and be timed at PyTorch's speed. Every
timed call of a gated function is recorded like an untimed gated call; after each request the
grader may pick one call's trace, and verify() replays one of those picked from the kernels
alone: the replay's checksum must be the call's to the last bit.
"""

from __future__ import annotations

import re

import pytest

from grader.fixtures import ProvingSubmission
from grader.judge.answers import compare
from grader.judge.evidence import provenance
from grader.judge.perf import timed_requests
from grader.judge.answers.inputs import seeded, torch_randn
from grader.sandbox.workers import Workers
from tests.cases import runnable
from tests.helpers import SOLUTIONS, Rng, copy_solutions

# A wrapper that is honest on its first call (the untimed, gated one) and on later calls
# (the timed ones) computes elsewhere: {body} is the timed branch.
CHEAT = '''
_calls = [0]


def softmax(x):
    _calls[0] += 1
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    BLOCK = triton.next_power_of_2(n_cols)
    if _calls[0] == 1:
        softmax_kernel[(n_rows,)](out, x, x.stride(0), n_cols, BLOCK=BLOCK,
                                  out_row_stride=out.stride(0))
        return out
{body}
'''
NO_LAUNCH = "    return torch.softmax(x.double(), -1).to(x.dtype)   # PyTorch, no kernel at all\n"
# the kernel runs (the trace shows a launch and nothing else), then PyTorch overwrites its
# answer with the trace switched off through an alias: the answer is right, not the kernel's
BEHIND_LAUNCH = '''    softmax_kernel[(n_rows,)](out, x, x.stride(0), n_cols, BLOCK=BLOCK,
                              out_row_stride=out.stride(0))
    _T = torch
    with _T._C._DisableTorchDispatch():
        out.copy_(_T.softmax(x.double(), -1).to(x.dtype))
    return out
'''


def _gated(workers: Workers, exercise: str) -> ProvingSubmission:
    """The checks' `student()` proxy on the interp layer, with its replay workers."""
    def replayer():
        filtered = provenance.replay_sources(workers.sources)
        return (workers.replayer(exercise, "interp", filtered),
                workers.replayer(exercise, "cpu", filtered), workers.sources)

    return ProvingSubmission(workers.get(exercise, "interp"), exercise, replayer=replayer)


def test_every_kernels_timed_calls_are_recorded():
    """A timed call counts only by what ran in it: every gated kernel's timed calls are recorded
    where the check has replays, the bandwidth-bound ones too."""
    from grader.registry import EXERCISES

    replayer = lambda: None   # noqa: E731 - never called here
    for name, exercise in EXERCISES.items():
        for fn in exercise.kernels:
            recorded = ProvingSubmission(object(), name, replayer=replayer).records_timed(fn)
            assert recorded, (name, fn)
            assert not ProvingSubmission(object(), name).records_timed(fn)   # no replays
    assert not ProvingSubmission(object(), "flash_triton",
                                 replayer=replayer).records_timed("attention_eager")


def _timed(folder, scratch, seed: int) -> tuple:
    """(workers, requests) after one gated call and two timed requests of softmax."""
    workers = Workers(folder, scratch)
    sub = _gated(workers, "softmax_triton")
    shape = (32, 130)   # rows enough that an answer a few ulps off shows in the checksum
    marker = seeded(shape, "float32", "cpu", seed, 1.0, 0)
    x = torch_randn(shape, "float32", "cpu", seed)
    import torch

    sub.softmax(marker)   # the untimed call: gated, its program replayed at the check's end
    reqs = timed_requests.Requests(sub, "softmax", [marker], rng=Rng(seed), inputs=[x],
                                   dtype="float32", what="softmax(x)",
                                   reference=lambda i: torch.softmax(i[0].double(), -1))
    reqs(1)
    reqs(2)
    return workers, reqs


def test_honest_timed_calls_replay_to_their_own_checksums(tmp_path):
    workers, reqs = _timed(SOLUTIONS, tmp_path / "scratch", 21)
    try:
        assert reqs.recorded
        assert reqs.verify() >= 2
        modes = {sub.mode for sub in workers.all()}
        assert {"interp", "cpu"} <= modes   # a replay (and its front-end check) ran
        assert reqs.replayed_peak is None   # memory is counted by a replay on CUDA alone
        from grader.errors import GraderError

        with pytest.raises(GraderError, match="no evidence to judge"):
            reqs.memory_bytes()   # no count is the grader's error, never a pass
    finally:
        workers.close()


@pytest.mark.parametrize("sent, kept", [(123, 123), (0, 0), (-1, None), (True, None),
                                        (1.5, None), ("9", None), (None, None)])
def test_a_timed_calls_memory_is_the_replays_own_count(sent, kept):
    """The GPU memory checks (memory_flat, memory_linear) read what the replay worker counted
    over the replayed steps, kept only once the replay gave the call's checksum; anything but a
    non-negative int is no count (those checks then say the evidence is missing)."""
    from grader.judge.answers.compare import CheckFailed
    from grader.judge.evidence.replayed import TimedCall, compare_sum

    timed = TimedCall({}, {}, 1.0, 0.0)
    compare_sum({"sum": 1.0, "peak_bytes": sent, "error": "", "compile": []}, timed, "call",
                atomics=False)
    assert timed.peak_bytes == kept and type(timed.peak_bytes) is type(kept)
    other = TimedCall({}, {}, 2.0, 0.0)   # a checksum that differs: no count is kept
    with pytest.raises(CheckFailed):
        compare_sum({"sum": 1.0, "peak_bytes": 5, "error": "", "compile": []}, other, "call",
                    atomics=False)
    assert other.peak_bytes is None


def _cheat(tmp_path, body: str):
    source = runnable((SOLUTIONS / "softmax_triton.py").read_text())
    cut = source.index("def softmax(x: torch.Tensor)")
    end = source.index("\n\n\n# ----", cut)   # the function ends where the next section begins
    folder = copy_solutions(tmp_path / "sub", {
        "softmax_triton.py": source[:cut] + CHEAT.format(body=body) + source[end:]})
    return _timed(folder, tmp_path / "scratch", 22)


def test_pytorch_in_timed_calls_fails(tmp_path):
    workers, reqs = _cheat(tmp_path, NO_LAUNCH)
    try:
        with pytest.raises(compare.CheckFailed,
                           match="launched no Triton kernel|computed with PyTorch") as failed:
            reqs.verify()   # the answers are right: only the trace and the replay can tell
        assert failed.value.follows == ("softmax_triton.uses_kernel",)
    finally:
        workers.close()


def test_pytorch_behind_a_launch_fails_by_checksum(tmp_path):
    """Every call of the last request replayed (verify() replays one, drawn after the calls).
    PyTorch's float64 softmax rounded to float32 differs from the kernel's in most elements by
    an ulp, but the checksum (grader.wire.checksum: row dot products in the output's dtype, then
    a float32 sum) does not keep every ulp: here 2 of the 3 calls show. docs/SECURITY.md says
    what this leaves open (an answer within an ulp or two of the kernel's)."""
    workers, reqs = _cheat(tmp_path, BEHIND_LAUNCH)
    try:
        spec, result, _, _ = reqs.done[-1]
        caught = []
        for j in range(len(spec["seeds"])):
            traced = reqs.sub.call("softmax", opts={"programs": [j]}).value["programs"][0]
            try:
                reqs._replay((2, spec, j, traced, result.value["sums"][j], 0.0))
            except compare.CheckFailed as e:
                assert re.search("not what its kernels compute: replaying .* checksum is", str(e))
                assert e.follows == ("softmax_triton.uses_kernel",)
                caught.append(j)
        assert len(caught) >= 2, caught
    finally:
        workers.close()
