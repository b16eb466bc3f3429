"""`make bench`'s HBM bytes (tools/bench/ncu.py, grader/exercises/flash_triton/bench_hbm.py), on a
CPU: ncu's CSV parsed and converted, the bytes placed between the IO model's bounds, the one line
where ncu is absent or may not count, the table and the plot; and the plumbing (a worker under
a stand-in ncu, as the sanitizer's tests do) driven once in interpreter mode.
"""

from __future__ import annotations

import types

import pytest

from grader.registry import exercise_module
from tests.helpers import SOLUTIONS
from tools.bench import ncu, plots
from tools.bench.harness import Context

hbm = exercise_module("flash_triton", "bench_hbm")
io_reference = exercise_module("io_model", "reference")
PNG = b"\x89PNG"

# what ncu 2025 writes with --csv --log-file: its ==PROF== lines, then one quoted row per
# (launch, metric); a torch kernel's demangled name holds commas, values thousands separators
SAMPLE = """==PROF== Connected to process 4242 (/usr/bin/python3.12)
==PROF== Profiling "distribution_elementwise_grid_stride_kernel" - 0: 0%....50%....100% - 1 pass
==PROF== Profiling "_flash_fwd" - 1: 0%....50%....100% - 1 pass
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3.12","127.0.0.1","void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, at::native::templates::cuda::normal_and_transform<c10::Half, float>(at::TensorIteratorBase &, at::CUDAGeneratorImpl *, T2)>(long, at::PhiloxCudaState, T3, T4)","1","7","(256, 1, 1)","(1056, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","2,048"
"0","4242","python3.12","127.0.0.1","void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, at::native::templates::cuda::normal_and_transform<c10::Half, float>(at::TensorIteratorBase &, at::CUDAGeneratorImpl *, T2)>(long, at::PhiloxCudaState, T3, T4)","1","7","(256, 1, 1)","(1056, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","Mbyte","67.11"
"1","4242","python3.12","127.0.0.1","_flash_fwd","1","7","(128, 1, 1)","(128, 32, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","Mbyte","1,302.65"
"1","4242","python3.12","127.0.0.1","_flash_fwd","1","7","(128, 1, 1)","(128, 32, 1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","Kbyte","65,536.5"
"2","4242","python3.12","127.0.0.1","_flash_fwd","1","7","(128, 1, 1)","(128, 32, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","Gbyte","0.5"
"2","4242","python3.12","127.0.0.1","_flash_fwd","1","7","(128, 1, 1)","(128, 32, 1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","byte","0"
"""
PERMISSION = """==PROF== Connected to process 4242 (/usr/bin/python3.12)
==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the target device 0. For instructions on enabling permissions and to get more information see https://developer.nvidia.com/ERR_NVGPUCTRPERM
==PROF== Disconnected from process 4242
==WARNING== No kernels were profiled.
"""


def test_parse_csv_converts_units_and_keeps_each_launch():
    launches = ncu.parse_csv(SAMPLE)
    assert [la["id"] for la in launches] == ["0", "1", "2"]
    assert launches[0]["kernel"].startswith("void at::native::") and launches[0][
        "dram__bytes_read.sum"] == 2048 and launches[0]["dram__bytes_write.sum"] == 67.11e6
    assert launches[1]["dram__bytes_read.sum"] == pytest.approx(1302.65e6)
    assert launches[1]["dram__bytes_write.sum"] == pytest.approx(65536.5e3)
    assert launches[2]["dram__bytes_read.sum"] == 0.5e9
    prof = ncu.Profile(launches, ["_flash_fwd"])       # the input kernel is not counted
    assert [la["id"] for la in prof.mine] == ["1", "2"]
    assert prof.read == pytest.approx(1302.65e6 + 0.5e9) and prof.written == pytest.approx(65536.5e3)


def test_units_and_kernel_names():
    assert ncu.to_bytes("1,073.74", "Mbyte") == pytest.approx(1.07374e9)
    assert ncu.to_bytes("3", "GiB") == 3 * 2**30
    with pytest.raises(ValueError, match="not a unit of bytes"):
        ncu.to_bytes("12", "nsecond")
    assert ncu.kernel_names({"compiled": [{"name": "_flash_fwd"}], "triton_kernels": ["_b"]}) == [
        "_b", "_flash_fwd"]
    assert ncu.matches("_flash_fwd", ["_flash_fwd"])
    assert ncu.matches("_flash_fwd_0d1d2d3d4c", ["_flash_fwd"])      # older Triton's suffix
    assert not ncu.matches("_flash_fwd_inner", ["_flash_fwd"])
    assert not ncu.matches("void at::native::elementwise_kernel<_flash_fwd>", ["_flash_fwd"])


def test_command_asks_for_the_counters_into_the_log():
    cmd = ncu.command(["/bin/ncu"], "/sandbox/log/ncu.csv")
    assert cmd[:3] == ["/bin/ncu", "--metrics", "dram__bytes_read.sum,dram__bytes_write.sum"]
    assert "--csv" in cmd and cmd[-2:] == ["--log-file", "/sandbox/log/ncu.csv"]
    assert cmd[cmd.index("--target-processes") + 1] == "all"
    wrapped = ncu.command(["/bin/ncu"], "x.csv", loopback=True)
    assert wrapped[4] == ncu.LOOPBACK_UP and wrapped[5] == "/bin/ncu"


def test_no_permission_and_no_counters_are_one_line(monkeypatch):
    monkeypatch.setattr(ncu, "admin_only", lambda: True)
    line = ncu.refusal(PERMISSION, counted=False)
    assert line.startswith(ncu.TITLE) and "RmProfilingAdminOnly: 1" in line and "\n" not in line
    monkeypatch.setattr(ncu, "admin_only", lambda: False)
    assert "ERR_NVGPUCTRPERM" in ncu.refusal(PERMISSION, counted=True)
    assert "a VM?" in ncu.refusal("==PROF== Disconnected from process 1\n", counted=False)
    assert ncu.refusal("==ERROR== The application returned an error code (9).\n", True) is None
    assert ncu.refusal(SAMPLE, counted=True) is None


def fake_ctx(have=("flash_triton", "io_model"), io_model=None):
    """A Context whose workers are stand-ins: io_model answers with `io_model` ({fn: f})."""
    funcs = io_model or {"flash_bytes_worst": io_reference.flash_bytes_worst,
                         "flash_bytes_l2": io_reference.flash_bytes_l2}

    class Worker:
        sources = directory = None

        def call(self, fn, *args, **kwargs):
            return types.SimpleNamespace(value=funcs[fn](*args))

    return Context(dict(device="cuda", bhd=[1, 32, 128], size="full"),
                   student=lambda module, mode: Worker(), have=have,
                   inputs=lambda shape, count: ([None] * count, [None] * count))


def one_section(rows) -> list[str]:
    return [line for line in hbm.table(rows, {}) if line]


def test_without_ncu_the_report_says_so_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(ncu, "ncu_path", lambda: None)
    rows = [row for batch in hbm.trials(fake_ctx(), [8192]) for row in batch]
    assert len(rows) == 1 and rows[0]["bytes"] is None and "not installed" in rows[0]["note"]
    section = one_section(rows)
    assert len(section) == 1 and section[0].startswith(f"**{ncu.TITLE}: not measured"), section
    said = [line for line in capsys.readouterr().out.splitlines() if ncu.TITLE in line]
    assert len(said) == 1, said


def test_no_permission_is_one_line_and_nothing_else(monkeypatch):
    monkeypatch.setattr(ncu, "ncu_path", lambda: "/usr/local/cuda/bin/ncu")
    monkeypatch.setattr("grader.judge.answers.gpu.attention_reference", lambda *t: None)

    def refused(*args, **kwargs):
        raise ncu.Unavailable(ncu.refusal(PERMISSION, counted=False))

    monkeypatch.setattr(ncu, "profile", refused)
    rows = [row for batch in hbm.trials(fake_ctx(), [8192]) for row in batch]
    assert rows[0]["error"] is None and "performance counters" in rows[0]["note"]
    assert len(one_section(rows)) == 1


def test_bounds_are_the_students_io_model_when_it_is_right():
    worst, best, source = hbm.bounds(fake_ctx(), 8192, 128, 64, 64)
    N, d, Br, heads = 8192, 128, 64, 32
    assert worst == (2 * N * d + 2 * N * N * d // Br) * 2 * heads       # the lesson's count
    assert best == 4 * N * d * 2 * heads and source.startswith("your io_model")
    wrong = {"flash_bytes_worst": lambda N, d, Br, Bc, e: 2 * N * d * (1 + N // Bc) * e,
             "flash_bytes_l2": io_reference.flash_bytes_l2}
    w, b, source = hbm.bounds(fake_ctx(io_model=wrong), 8192, 128, 64, 32)
    assert (w, b) == (io_reference.flash_bytes_worst(8192, 128, 64, 32) * 32, best)
    assert source.startswith("the grader's") and "yours give" in source

    def todo(*args):
        raise NotImplementedError("TODO(io_model): flash_bytes_worst")

    _, _, source = hbm.bounds(fake_ctx(io_model={"flash_bytes_worst": todo}), 8192, 128, 64, 64)
    assert "the grader's" in source and "TODO(io_model)" in source
    _, _, source = hbm.bounds(fake_ctx(have=("flash_triton",)), 8192, 128, 64, 64)
    assert "not in the submission" in source


def test_placement_between_the_bounds():
    # best 4 (reads 3 + output 1), worst 101 (reads 100 + output 1), in bytes
    half = hbm.place(51.5, 1.0, 4.0, 101.0, 1.0)
    assert half["verdict"] == "reads between the bounds" and half["l2_share"] == pytest.approx(0.5)
    assert half["x_best"] == pytest.approx(52.5 / 4)
    best = hbm.place(3.0, 0.8, 4.0, 101.0, 1.0)     # output partly still in L2: reads decide
    assert best["verdict"] == "reads between the bounds" and best["l2_share"] == pytest.approx(1)
    assert hbm.place(2.0, 1.0, 4.0, 101.0, 1.0)["verdict"] == "reads below the best case"
    assert hbm.place(200.0, 1.0, 4.0, 101.0, 1.0)["verdict"] == "reads above the worst case"


def test_a_profile_fills_the_row_with_the_kernels_block_m(monkeypatch):
    """BLOCK_M as compiled (128 here, though 64 was asked) is the Br of the worst case."""
    monkeypatch.setattr(ncu, "ncu_path", lambda: "/usr/local/cuda/bin/ncu")
    monkeypatch.setattr("grader.judge.answers.gpu.attention_reference", lambda *t: None)
    launches = ncu.parse_csv(SAMPLE)
    extras = {"compiled": [{"name": "_flash_fwd", "constexprs": {"BLOCK_M": 128, "BLOCK_N": 64}}]}
    monkeypatch.setattr(ncu, "profile", lambda sub, ex, call: ncu.Profile(
        launches, ncu.kernel_names(extras), extras))
    row = next(iter(hbm.trials(fake_ctx(), [8192])))[0]
    assert row["BLOCK_M"] == 128 and row["launches"] == 2 and row["kernels"] == ["_flash_fwd"]
    assert row["worst"] == io_reference.flash_bytes_worst(8192, 128, 128, 64) * 32
    assert row["bytes"] == pytest.approx(1302.65e6 + 0.5e9 + 65536.5e3)
    text = "\n".join(hbm.table([row], {}))
    assert f"## {ncu.TITLE}" in text and "| measured: read + written | 1.87 GB |" in text
    assert "BLOCK_M = 128 (Br)" in text and "2 launches of _flash_fwd" in text


def test_table_and_plot_from_the_synthetic_row(tmp_path):
    rows = hbm.synthetic()
    text = "\n".join(hbm.table(rows, {}))
    assert "| best case: 4Nd elements per head (K and V re-read from L2) | 268 MB | 1 |" in text
    assert "between the bounds" in text and "17.3 GB" in text
    (path,) = plots.render(tmp_path, hbm.HBM, rows, {})
    assert path.name == "hbm_bytes.png" and path.read_bytes()[:4] == PNG
    (empty,) = plots.render(tmp_path, hbm.HBM, [dict(N=8192, note="x", bytes=None)], {})
    assert empty.read_bytes()[:4] == PNG


def test_plan_fits_the_budget():
    assert hbm.plan([8192], 80e9, None, (1, 32, 128)) == ([8192], [])
    assert hbm.plan([8192], 1.8e9, None, (1, 32, 128))[0] == [4096]   # 2.1 GB at 8K
    todo, skipped = hbm.plan([8192], 0.5e9, None, (1, 32, 128))
    assert todo == [] and "budget" in skipped[0]["note"]


# a stand-in for ncu: runs the worker, then writes a CSV with one launch of the kernel the
# call made and one that is not the student's (same command line as ncu's)
FAKE_NCU = ["/bin/sh", "-c", 'while [ "$#" -gt 0 ]; do case "$1" in --log-file) log="$2"; '
            'shift 2;; --csv) shift;; --*) shift 2;; *) break;; esac; done; "$@"; rc=$?; '
            "printf '%s\\n' '\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"' "
            "'\"0\",\"void fill_kernel\",\"dram__bytes_read.sum\",\"Mbyte\",\"9\"' "
            "'\"1\",\"_flash_fwd\",\"dram__bytes_read.sum\",\"Kbyte\",\"12.5\"' "
            "'\"1\",\"_flash_fwd\",\"dram__bytes_write.sum\",\"byte\",\"4,096\"' > \"$log\"; "
            "exit $rc", "fake-ncu"]


def test_a_worker_under_a_stand_in_ncu_counts_only_the_call_s_kernels():
    pytest.importorskip("triton")
    from grader.exercises.flash_triton.reference import reference_torch
    from grader.judge.answers.inputs import seeded, torch_randn
    from grader.judge.evidence import sanitize

    shape, seeds = (1, 1, 32, 16), (1, 2, 3)

    def call(sub):
        r = sub.call("flash_fwd", *(seeded(shape, "float16", "cpu", s) for s in seeds),
                     BLOCK_M=16, BLOCK_N=16, opts={"trace": True})
        q, k, v = (torch_randn(shape, "float16", "cpu", s).float() for s in seeds)
        assert sanitize.close_enough(r.value, reference_torch(q, k, v))
        return r.extras

    prof = ncu.profile(SOLUTIONS, "flash_triton", call, tool=FAKE_NCU, mode="interp")
    assert prof.kernels == ["_flash_fwd"] and len(prof.launches) == 2
    assert (prof.read, prof.written) == (12.5e3, 4096)
