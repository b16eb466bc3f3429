"""Kernel-use evidence judged on the trusted side (grader/judge/evidence/kernel_use.py), without a GPU:
device-kernel names from the profiler, out-of-bounds records from the interpreter's bounds
checks, and stores tracked per allocation."""

from __future__ import annotations

import numpy as np
import pytest

from grader.judge.answers.compare import CheckFailed
from grader.fixtures import ProvedCall
from grader.judge.evidence.kernel_use import (assert_in_bounds, assert_kernel_computed, assert_kernel_wrote,
                                     foreign_kernels, out_of_bounds)
from grader.judge.evidence.provenance import Call

TRACE = {"ops": ["empty_like", "view"], "launches": 1, "triton_kernels": ["_flash_fwd"]}


def test_only_triton_and_copy_kernels_may_run():
    kernels = ["_flash_fwd", "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::Half> >",
               "Memcpy HtoD (Pageable -> Device)"]
    assert foreign_kernels(kernels, ["_flash_fwd"]) == []
    assert_kernel_computed({**TRACE, "kernels": kernels}, "flash_fwd(q, k, v)", "_flash_fwd[grid](...)",
                           "the attention")


@pytest.mark.parametrize("kernel", [
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0",
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4> >",
    "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::Half, float>",
])
def test_library_kernels_from_any_thread_fail_naming_the_kernel(kernel):
    with pytest.raises(CheckFailed) as e:
        assert_kernel_computed({**TRACE, "kernels": ["_flash_fwd", kernel]}, "flash_fwd(q, k, v)",
                               "_flash_fwd[grid](...)", "the attention")
    assert kernel[:60] in str(e.value)


RECORD = [{"access": "tl.load", "line": "flash_triton.py:72", "code": "k = tl.load(K + off)",
           "tensor": {"arg": 1}, "lanes": 896, "past": 448}]
MASKS = {"tl.load": "mask the K load", "tl.store": "mask the store"}


def test_out_of_bounds_names_tensor_line_and_mask():
    with pytest.raises(CheckFailed) as e:
        out_of_bounds(RECORD, ["q", "k", "v"], "flash_fwd(q, k, v)", MASKS)
    assert "flash_triton.py:72" in str(e.value) and "outside k" in str(e.value)
    assert e.value.hint == "mask the K load"
    out_of_bounds([], ["q"], "x", {})


@pytest.mark.parametrize("record", [None, {"lanes": 3}, [1, 2], "[]"])
def test_a_missing_or_malformed_bounds_record_fails(record):
    """Fail closed: no record of the lanes is never in bounds."""
    with pytest.raises(CheckFailed, match="evidence was missing"):
        out_of_bounds(record, ["q"], "flash_fwd(q, k, v)", MASKS)


def test_the_bounds_verdict_waits_for_the_replay():
    """With a replay, assert_in_bounds judges nothing at once, however the call's own record
    reads (the student's process made it): it leaves its judge on the replay, which the
    replay's record decides (grader.judge.evidence.provenance); without one, the call's own record."""
    replayed = Call(None, None, [], None, {"bounds": True})
    clean = ProvedCall(None, extras={"out_of_bounds": []}, opts={"bounds": True}, replayed=replayed)
    assert_in_bounds(clean, ["q", "k", "v"], "flash_fwd(q, k, v)", MASKS)
    with pytest.raises(CheckFailed, match="outside k"):
        replayed.bounds_judge(RECORD)
    alone = ProvedCall(None, extras={"out_of_bounds": RECORD}, opts={"bounds": True})
    with pytest.raises(CheckFailed, match="outside k"):
        assert_in_bounds(alone, ["q", "k", "v"], "flash_fwd(q, k, v)", MASKS)
    cuda = ProvedCall(None, extras={}, opts={"kernels": True})
    assert_in_bounds(cuda, ["q"], "x", MASKS)   # compute-sanitizer judges masks on a GPU


def test_a_kernel_that_stores_nothing_or_nan_earns_nothing():
    out = np.zeros((2, 3))
    with pytest.raises(CheckFailed, match="never stored"):
        assert_kernel_wrote({"allocations": [{"numel": 6, "unstored": 6, "first_unstored": 0,
                                              "stored_nan": 0, "dtype": "torch.float16"}]},
                            out, 6, "softmax(x)", "softmax_kernel")
    with pytest.raises(CheckFailed, match="NaN"):
        assert_kernel_wrote({"allocations": []}, np.full((2, 3), np.nan), 6, "softmax(x)",
                            "softmax_kernel")
    assert_kernel_wrote({"allocations": [{"numel": 6, "unstored": 0, "first_unstored": -1,
                                          "stored_nan": 0, "dtype": "torch.float16"}]},
                        out, 6, "softmax(x)", "softmax_kernel")


class FakeSub:
    """A Submission stand-in that records the opts it was sent and answers with given extras."""

    def __init__(self, mode, extras):
        self.mode, self.extras, self.sent = mode, extras, []
        self.directory = "somewhere"
        self.worker_pid = None   # no GPU process list to judge here

    def call(self, fn, *args, opts=None, **kwargs):
        from grader.sandbox.proxy import CallResult

        self.sent.append(dict(opts or {}))
        return CallResult(np.zeros(3), extras=self.extras)


def test_gate_asks_for_the_profiler_on_cuda_and_bounds_under_the_interpreter():
    from grader.fixtures import ProvingSubmission

    cuda = FakeSub("cuda", {**TRACE, "kernels": ["_flash_fwd"]})
    ProvingSubmission(cuda, "flash_triton").flash_fwd(1, 2, 3)
    assert cuda.sent[-1]["kernels"] and cuda.sent[-1]["trace"]
    interp = FakeSub("interp", dict(TRACE))
    ProvingSubmission(interp, "flash_triton").call("flash_fwd", opts={"poison_empty": True})
    assert interp.sent[-1]["bounds"] and interp.sent[-1]["poison_empty"]
    assert ProvingSubmission(interp, "flash_triton").directory == "somewhere"
    with pytest.raises(CheckFailed, match="cudnn"):
        ProvingSubmission(FakeSub("cuda", {**TRACE, "kernels": ["_flash_fwd", "cudnn_fwd_kernel"]}),
              "flash_triton").flash_fwd()
    # timed requests are the perf checks' business: not gated here
    timed = FakeSub("cuda", {})
    ProvingSubmission(timed, "flash_triton").call("flash_fwd", opts={"runs": {"seeds": [1, 2]}})
    assert "kernels" not in timed.sent[-1]


def test_gate_covers_flash_decode_with_its_size_reductions():
    from grader.fixtures import ProvingSubmission

    # the wrapper may reduce seq_lens to choose a split count; both kernels may run
    ok = {"ops": ["empty", "max", "_local_scalar_dense"], "launches": 2,
          "kernels": ["_decode_split_0d1d", "_decode_merge_0d1d"],
          "triton_kernels": ["_decode_split", "_decode_merge"]}
    ProvingSubmission(FakeSub("cuda", ok), "flash_decode").flash_decode(1, 2, 3, 4)
    interp = FakeSub("interp", {"ops": ["max"], "launches": 2})
    ProvingSubmission(interp, "flash_decode").flash_decode(1, 2, 3, 4)
    assert interp.sent[-1]["bounds"] and interp.sent[-1]["trace"]
    for extras, match in (({"ops": ["_scaled_dot_product_flash_attention"], "launches": 1}, "PyTorch"),
                          ({"ops": ["bmm", "_softmax"], "launches": 1}, "PyTorch"),
                          ({"ops": ["empty"], "launches": 0}, "no Triton kernel"),
                          ({**ok, "kernels": ["_decode_split_0d1d", "cutlass_gemm"]}, "cutlass")):
        with pytest.raises(CheckFailed, match=match):
            ProvingSubmission(FakeSub("cuda", extras), "flash_decode").flash_decode(1, 2, 3, 4)
    # merge_partials is the NumPy part: not gated
    numpy_part = FakeSub("interp", {})
    ProvingSubmission(numpy_part, "flash_decode").call("merge_partials", [])
    assert numpy_part.sent == [{}]
