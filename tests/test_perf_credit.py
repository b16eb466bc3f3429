"""Every perf check's credit from its readings, on the CPU: the check's own body runs with its
GPU work replaced (inputs, baselines and the student's requests are fakes that report chosen
times), so what is tested is how each check turns readings into credit (grader.judge.perf.verdicts):
a kernel well inside full marks takes three samples and is decided; one whose readings span
the band takes more, up to timing.SAMPLES_MAX, and its report says the credit was not decided.
"""

from __future__ import annotations

import types

import pytest

from grader.judge.perf import baselines, timing
from grader.results import Credit
from tests.helpers import Rng

SPREAD = (0.8, 1.25, 1.0, 0.85, 1.2, 0.9, 1.1)   # the middle three of all seven: 0.9 .. 1.1


class FakeRequest:
    """A student's timed requests that report their own time (per_call_ms accepts a float):
    the warm-up and probe at 1 ms a call, then sample k at `speeds[k]` ms a call."""

    what, peak_bytes = "the fake's calls", 0   # what a check prints of them, memory at peak

    def __init__(self, speeds: list[float]):
        self.speeds, self.made = list(speeds), 0

    def __call__(self, repeat: int) -> float:
        self.made += 1
        k = (self.made - 4) // 2
        return float(1 + repeat) if self.made <= 3 else self.speeds[k] * (1 + repeat)

    @property
    def samples(self) -> int:
        return (self.made - 3) // 2

    def checked(self):
        return lambda: None


class FakeGpu:
    profile = tile_profile = target = None
    info = {"total_memory_gb": 80}

    def __init__(self, copy_gbs: float = 1000.0):
        self.copy_gbs = copy_gbs

    def ceiling(self, name: str) -> float:
        return {"copy_gbs": self.copy_gbs, "matmul_tflops": 1e6}[name]


class Tensorish:
    """What a check reads of an input it only sizes: numel, element_size, shape."""

    def __init__(self, rows: int, cols: int):
        self.shape = (rows, cols)

    def numel(self) -> int:
        return self.shape[0] * self.shape[1]

    def element_size(self) -> int:
        return 2


def _requests(monkeypatch, module, name: str, speeds_of):
    """module.<name> (the check's request maker) gives FakeRequests; speeds_of(i) -> the i-th's
    speeds. Returns the list of requests made."""
    made = []

    def make(*args, **kwargs):
        made.append(FakeRequest(speeds_of(len(made))))
        return made[-1]

    monkeypatch.setattr(module, name, make)
    return made


def _run(check, **fixtures) -> Credit:
    credit = Credit()
    check(student=lambda: types.SimpleNamespace(), rng=Rng(3), credit=credit,
          workers=None, after_timing=lambda work: None, **fixtures)
    return credit


def _flash_triton(monkeypatch, speeds):
    from grader.exercises.flash_triton import test_perf as m
    from grader.judge.answers import gpu as g
    from grader.judge.perf import quiet_gpu

    monkeypatch.setattr(quiet_gpu, "quiet_gpu", lambda workers, what: "")
    monkeypatch.setattr(g, "seeded_inputs", lambda rng, shape, dtype: ([], []))
    monkeypatch.setattr(m, "_sdpa_ms", lambda *a: (1.0, "CUDNN_ATTENTION"))
    monkeypatch.setattr(m, "_fastest_tiles", lambda *a: ("its default tiles", {},
                                                         {"its default tiles": (1.0, {})}, ""))
    # SDPA at 1 ms: full marks at 3x its time or less, none at 6x
    made = _requests(monkeypatch, m, "_flash_requests", lambda i: speeds)
    return _run(m.test_speed_vs_sdpa, gpu=FakeGpu()), made


def _flash_decode_bandwidth(monkeypatch, speeds, harness=0.0):
    from grader.exercises.flash_decode import test_perf as m

    monkeypatch.setattr(m, "perf_cases", lambda total: [(8, 32768)])
    monkeypatch.setattr(m, "_decode_inputs", lambda *a: ([], None))
    monkeypatch.setattr(m, "_checked_once", lambda *a, **k: (lambda: None))
    monkeypatch.setattr(m, "_harness_ms", lambda workers, rng, what: (harness, ""))
    nbytes = 2 * m.PERF_B * 8 * 32768 * m.PERF_D * 2
    # the copy bandwidth such that 1 ms reads K and V at 0.375 of it: full marks at 0.6,
    # none at 0.15 (and the floor at 0.3 ms)
    gpu = FakeGpu(copy_gbs=nbytes / (1.0 * 1e6) / 0.375)
    made = _requests(monkeypatch, m, "_decode_requests", lambda i: speeds)
    return _run(m.test_bandwidth, gpu=gpu), made


def _flash_decode_splits(monkeypatch, speeds):
    from grader.exercises.flash_decode import test_perf as m

    monkeypatch.setattr(m, "_decode_inputs", lambda *a: ([], None))
    monkeypatch.setattr(m, "_checked_once", lambda *a, **k: (lambda: None))
    monkeypatch.setattr(m, "_harness_ms", lambda workers, rng, what: (0.0, ""))
    # num_splits=None at 1 ms, num_splits=1 at `speeds`: full marks at 4x, none at 1x (no
    # copy bandwidth: no floor to judge against)
    made = _requests(monkeypatch, m, "_decode_requests",
                     lambda i: [1.0] * 7 if i == 0 else speeds)
    return _run(m.test_splits_speedup, gpu=FakeGpu(copy_gbs=float("nan"))), made


def _flash_backward(monkeypatch, speeds):
    from grader.exercises.flash_backward import test_perf as m

    perf = m.Perf()
    made = []
    for N in m.PERF_N:
        for causal in (False, True):
            for name in ("fwd", "bwd"):
                request = FakeRequest(speeds)
                perf.ms[(name, N, causal)] = timing.per_call_ms(request)
                made.append(request)
            perf.base[(N, causal)] = {"fwd": (1.0, "CUDNN_ATTENTION"),
                                      "bwd": (1.0, "CUDNN_ATTENTION")}
    monkeypatch.setattr(m, "measure", lambda *a: perf)
    return _run(m.test_forward_speed, gpu=FakeGpu()), made


def _flash_backward_causal(monkeypatch, speeds, again=None):
    """flash_backward's timing itself (test_perf._time), non-causal at 1 ms a call and causal at
    `speeds` (a second timing of the causal time: at `again`, when given), then
    causal_skips_blocks on what it measured."""
    from grader.exercises.flash_backward import test_perf as m

    perf = m.Perf()
    made = []

    def make(sub, rng, name, N, causal, *rest):
        timed_before = any(r.causal == causal and r.name == name for r in made)
        made.append(FakeRequest(speeds if causal and not (timed_before and again) else
                                again if causal else [1.0] * 7))
        made[-1].name, made[-1].causal = name, causal
        return made[-1]

    monkeypatch.setattr(m, "_requests", make)
    configs = [(N, c) for N in m.PERF_N for c in (False, True)]
    m._time(perf, None, Rng(3), FakeGpu(), {N: (None, None) for N in m.PERF_N}, configs, {})
    monkeypatch.setattr(m, "measure", lambda *a: perf)
    return _run(m.test_causal_skips_blocks, gpu=FakeGpu()), made


def _softmax(monkeypatch, module_name, speeds):
    import importlib

    from grader.judge.answers import gpu as g

    m = importlib.import_module(f"grader.exercises.{module_name}.test_perf")
    monkeypatch.setattr(g, "seeded_inputs",
                        lambda rng, shape, dtype, count: ([None], [Tensorish(*shape)]))
    made = []

    def timed_against(sub, rng, gpu, workers, name, cases, *args, **kwargs):
        out = []
        for _, x, moved, _ in cases:
            # the baseline at 1 ms, the student's at `speeds`; the copy bandwidth such
            # that 1 ms is 0.375 of it
            mine = FakeRequest(speeds)
            made.append(mine)
            out.append(baselines.Timed(timing.per_call_ms(mine), timing.Reading.of([1.0] * 3), 0.0,
                                    moved, moved / 1e6 / 0.375, ""))
        return out

    monkeypatch.setattr(baselines, "timed_against", timed_against)
    return _run(m.test_bandwidth, gpu=FakeGpu()), made


# each check: (how to run it with given speeds, the factor on SPREAD of a kernel well inside
# full marks, of one whose median earns about half the credit)
CHECKS = {
    "flash_triton.speed_vs_sdpa": (_flash_triton, 1.0, 4.5),
    "flash_decode.bandwidth": (_flash_decode_bandwidth, 0.4, 1.0),
    "flash_decode.splits_speedup": (_flash_decode_splits, 5.0, 2.5),
    "flash_backward.forward_speed": (_flash_backward, 1.0, 4.5),
    # of the non-causal time: full marks at 0.8 or less, none at 0.95
    "flash_backward.causal_skips_blocks": (_flash_backward_causal, 0.5, 0.875),
    "softmax_triton.bandwidth": (lambda mp, s: _softmax(mp, "softmax_triton", s), 0.3, 1.0),
    "softmax_long.bandwidth": (lambda mp, s: _softmax(mp, "softmax_long", s), 0.3, 1.0),
}


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_well_inside_the_band_is_decided_in_three_samples(check, monkeypatch):
    run, fast, _ = CHECKS[check]
    credit, made = run(monkeypatch, [s * fast for s in SPREAD])   # never out of full marks
    assert credit.fraction == 1.0 and not credit.undecided, credit.note
    assert "not decided" not in credit.note.lower()
    assert made and all(r.samples == 3 for r in made), [r.samples for r in made]


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_readings_across_the_band_take_more_samples_and_say_so(check, monkeypatch):
    run, _, middle = CHECKS[check]
    credit, made = run(monkeypatch, [s * middle for s in SPREAD])
    assert 0.0 < credit.fraction < 1.0, credit.note
    assert credit.undecided and "Not decided in this run" in credit.note, credit.note
    settles = check in ("flash_triton.speed_vs_sdpa", "flash_decode.bandwidth",
                        "flash_decode.splits_speedup",   # a baseline known before the timing
                        "flash_backward.causal_skips_blocks")   # the non-causal time, timed first
    assert max(r.samples for r in made) == (timing.SAMPLES_MAX if settles else 3)


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_steady_readings_in_the_band_are_decided(check, monkeypatch):
    run, _, middle = CHECKS[check]
    credit, made = run(monkeypatch, [s * middle for s in (1.0, 1.001, 0.999, 1.0, 1.0, 1.0, 1.0)])
    assert 0.0 < credit.fraction < 1.0 and not credit.undecided, credit.note
    assert all(r.samples == 3 for r in made)


def test_an_open_causal_reading_is_timed_again_and_the_faster_kept(monkeypatch):
    """flash_backward's causal time still across causal_skips_blocks' band after its samples
    (a disturbance through the whole reading) is timed once more with the non-causal time
    before it; each keeps its faster reading, and the report says so. A decided one is not."""
    credit, made = _flash_backward_causal(monkeypatch, [s * 0.875 for s in SPREAD],
                                          again=[s * 0.5 for s in SPREAD])
    assert credit.fraction == 1.0 and not credit.undecided, credit.note
    assert "taken twice" in credit.note and "flash_fwd and flash_bwd" in credit.note
    assert [(r.name, r.causal) for r in made[4:]] == [("fwd", False), ("fwd", True),
                                                     ("bwd", False), ("bwd", True)]
    credit, made = _flash_backward_causal(monkeypatch, [s * 0.5 for s in SPREAD])
    assert len(made) == 4 and "twice" not in credit.note


def test_a_time_the_harness_outweighs_earns_no_bandwidth(monkeypatch):
    """A reading above the floor but below the harness's own cost leaves no time for the
    kernel: the check fails, as it did before readings had a range (never a division that the
    range's clamp at zero would turn into full marks)."""
    from grader.judge.answers.compare import CheckFailed

    with pytest.raises(CheckFailed, match="impossible; no bandwidth points"):
        _flash_decode_bandwidth(monkeypatch, [1.0] * 7, harness=2.0)


def test_nan_earns_nothing_and_a_zero_range_settles():
    from grader.judge.perf import verdicts

    assert verdicts.linear(float("nan"), 3.0, 6.0) == 0.0
    assert timing.span(float("nan"))[0] != timing.span(float("nan"))[0]
    tally = verdicts.Tally("flash_triton")
    tally.add("vs_sdpa", float("nan"), 1.0, 2.0)
    assert tally.fraction == 0.0 and tally.undecided()     # the range ends say full marks
    settles = verdicts.settles("flash_decode", "bandwidth", lambda t: 1.0 / t)
    assert settles(timing.Reading.of([0.0, 0.0, 1.0]))


@pytest.mark.parametrize("seed", range(20))
def test_the_credit_is_the_one_the_medians_gave_before_readings_had_ranges(seed, monkeypatch):
    """softmax_long and softmax_triton, the two checks made of weighted parts: the Tally gives
    the credit of the formula they used before, to the last bit (0.5 x bandwidth + 0.5 x speed
    per width, then the mean of the widths)."""
    import numpy as np

    from grader.exercises.softmax_long.test_perf import WIDTHS
    from grader.judge.perf import verdicts

    speed = float(np.random.default_rng(seed).uniform(0.2, 2.0))

    def timed(rows, cols):   # as the fake timed_against makes them
        moved = 2 * rows * cols * 2
        return baselines.Timed(timing.per_call_ms(FakeRequest([speed] * 7)),
                            timing.Reading.of([1.0] * 3), 0.0, moved, moved / 1e6 / 0.375, "")

    credit, _ = _softmax(monkeypatch, "softmax_long", [speed] * 7)
    scores = []
    for rows, cols, band in WIDTHS:
        t = timed(rows, cols)
        scores.append(0.5 * verdicts.credit("softmax_long", band, t.fraction)
                      + 0.5 * verdicts.credit("softmax_long", "vs_torch", t.mine / t.base))
    assert credit.fraction == max(0.0, min(1.0, sum(scores) / len(scores)))

    from grader.exercises.softmax_triton.test_perf import BANDWIDTH_SHAPE

    credit, _ = _softmax(monkeypatch, "softmax_triton", [speed] * 7)
    t = timed(*BANDWIDTH_SHAPE)
    before = (0.5 * verdicts.credit("softmax_triton", "bandwidth", t.fraction)
              + 0.5 * verdicts.credit("softmax_triton", "vs_eager", t.base / t.mine))
    assert credit.fraction == max(0.0, min(1.0, before))


@pytest.mark.parametrize("ratios, timed, says", [
    ((100, 95, 90, 85), 1, "stopped there: at 100x"),    # hopeless: no shape could earn a point
    ((40, 30, 20, 2), 4, ""),       # 40x could still reach 6x with a better shape: on to 2x
    ((5, 2, 1, 1), 2, ""),          # well inside full marks at the second shape
])
def test_the_tile_sweep_stops_where_no_shape_could_change_the_credit(ratios, timed, says,
                                                                     monkeypatch):
    """flash_triton's sweep over tile shapes (SDPA at 1 ms, full marks at 3x, none at 6x): the
    student's defaults first, then each shape until one is well inside full marks, or until the
    fastest so far is more than TILE_SPREAD times past no credit."""
    from grader.exercises.flash_triton import test_perf as m
    from grader.judge.machine.devices import HOPPER

    assert len(HOPPER.flash_configs) > 4
    gpu = types.SimpleNamespace(tile_profile=HOPPER, target=None)
    made = _requests(monkeypatch, m, "_flash_requests", lambda i: [ratios[i]] * 7)
    monkeypatch.setattr(timing, "per_call_ms", lambda reqs, **k: reqs.speeds[0])
    chosen, blocks, tried, stopped = m._fastest_tiles(None, Rng(3), gpu, [], [], 1.0, lambda w: 0)
    assert len(made) == len(tried) == timed, tried
    assert min(ms for ms, _ in tried.values()) == min(ratios[:timed])
    assert (says in stopped) if says else stopped == "", stopped
