"""io_model's cpu checks, for exercises/io_model.py (extension track; lesson: "What naive
attention actually does", "Counting bytes: the IO argument", the roofline and the SRAM arithmetic
in "Two kinds of memory on one chip").

Every check calls the student's function on fresh random shapes (N from 1 to 128K, ragged; any
d; fp16 and fp32 element sizes; Br != Bc) and on the lesson's worked numbers, and compares with
the grader's own formula (reference.py): counts exactly, real numbers within a relative 1e-9
(judging.py). One idea per check; the exp overflow thresholds are in test_adversarial.py.
"""

from __future__ import annotations

import pytest

from grader.exercises.io_model import reference
from grader.exercises.io_model.judging import check_all

CASES = 16


@pytest.mark.check("io_model.naive_bytes")
def test_naive_bytes(student, rng, credit):
    calls = [(s, f"N={s[0]}, d={s[1]}, {s[2]} bytes") for s in reference.shapes(rng, CASES)]
    check_all(student(), "naive_bytes", calls + reference.lesson_calls("naive_bytes"), credit,
              exact=True, seed=rng.seed)


@pytest.mark.check("io_model.naive_flops")
def test_naive_flops(student, rng, credit):
    calls = [((N, d), f"N={N}, d={d}") for N, d, _ in reference.shapes(rng, CASES)]
    check_all(student(), "naive_flops", calls + reference.lesson_calls("naive_flops"), credit,
              exact=True, seed=rng.seed)


@pytest.mark.check("io_model.intensity_flat_in_n")
def test_intensity_flat_in_n(student, rng, credit):
    # the same d at N, 4N and 64N: an intensity that grows with N fails the larger ones
    calls = []
    for N, d, e in reference.shapes(rng, CASES // 2, high=1 << 12):
        calls += [((n, d, e), f"N={n}, d={d}, {e} bytes") for n in (N, 4 * N, 64 * N)]
    check_all(student(), "naive_intensity", calls + reference.lesson_calls("naive_intensity"),
              credit, exact=False, seed=rng.seed)


@pytest.mark.check("io_model.flash_worst_case")
def test_flash_worst_case(student, rng, credit):
    calls = [(s, f"N={s[0]}, d={s[1]}, Br={s[2]}, Bc={s[3]}, {s[4]} bytes"
                 + ("" if s[0] % s[2] else ", Br divides N"))
             for s in reference.block_shapes(rng, CASES)]
    check_all(student(), "flash_bytes_worst", calls + reference.lesson_calls("flash_bytes_worst"),
              credit, exact=True, seed=rng.seed)


@pytest.mark.check("io_model.flash_l2_case")
def test_flash_l2_case(student, rng, credit):
    calls = [(s, f"N={s[0]}, d={s[1]}, {s[2]} bytes") for s in reference.shapes(rng, CASES)]
    check_all(student(), "flash_bytes_l2", calls + reference.lesson_calls("flash_bytes_l2"),
              credit, exact=True, seed=rng.seed)


@pytest.mark.check("io_model.flash_sram_theorem")
def test_flash_sram_theorem(student, rng, credit):
    # M from 16K to 1M elements (32 KB to 4 MB of fp16/fp32 SRAM), any integer
    calls = []
    for N, d, e in reference.shapes(rng, CASES):
        M = int(rng.integers(16 << 10, 1 << 20))
        calls.append(((N, d, M, e), f"N={N}, d={d}, M={M} elements, {e} bytes"))
    check_all(student(), "flash_bytes_sram", calls, credit, exact=False, seed=rng.seed)


@pytest.mark.check("io_model.sp_memory")
def test_sp_memory(student, rng, credit):
    sub = student()
    calls = []
    for N, _, e in reference.shapes(rng, CASES):
        H, B = int(rng.integers(1, 129)), int(rng.integers(1, 9))
        calls.append(((H, N, e, B), f"H={H}, N={N}, {e} bytes, B={B}"))
    check_all(sub, "sp_bytes", calls + reference.lesson_calls("sp_bytes"), credit, exact=True,
              seed=rng.seed)
    states = [((H, N, B), f"H={H}, N={N}, B={B}") for (H, N, _, B), _ in calls]
    check_all(sub, "flash_state_bytes", states + reference.lesson_calls("flash_state_bytes"),
              credit, exact=True, seed=rng.seed)


@pytest.mark.check("io_model.ridge_point")
def test_ridge_point(student, rng, credit):
    calls = [((f, b), f"{f / 1e12:.4g} TFLOP/s, {b / 1e9:.4g} GB/s")
             for f, b in reference.devices(rng, CASES)]
    check_all(student(), "ridge_point", calls + reference.lesson_calls("ridge_point"), credit,
              exact=False, seed=rng.seed)


@pytest.mark.check("io_model.sram_bandwidth")
def test_sram_bandwidth(student, rng, credit):
    calls = []
    for _ in range(CASES):
        sms, clock, bpc = int(rng.integers(8, 200)), float(rng.uniform(0.8e9, 2.5e9)), \
            int(rng.choice((64, 128, 256)))
        calls.append(((sms, clock, bpc), f"{sms} SMs, {clock / 1e9:.3f} GHz, {bpc} B/clock"))
    check_all(student(), "sram_bandwidth", calls + reference.lesson_calls("sram_bandwidth"),
              credit, exact=False, seed=rng.seed)


@pytest.mark.check("io_model.memory_or_compute")
def test_memory_or_compute(student, rng, credit):
    # intensities from 1/30 to 30 times the ridge point, never within 1% of it
    calls = []
    for f, b in reference.devices(rng, CASES):
        side = 1 if len(calls) % 2 else -1
        intensity = f / b * float(10 ** (side * rng.uniform(0.005, 1.5)))
        calls.append(((intensity, f, b), f"intensity {intensity:.4g}, ridge {f / b:.4g}"))
    check_all(student(), "bound", calls + reference.lesson_calls("bound"), credit, exact=True,
              seed=rng.seed)
