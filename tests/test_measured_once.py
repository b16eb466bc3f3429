"""grader.judge.perf.measured_once: the grader's own measurements, once per batch and device."""

from __future__ import annotations

import json

from grader.judge.perf import measured_once as r
from tests.helpers import set_options


def test_measured_once_per_batch_and_device(tmp_path, monkeypatch):
    calls = []

    def measure():
        calls.append(1)
        return {"fwd": (1.25, "CUDNN_ATTENTION"), "failed": [], "inf": float("inf")}

    set_options(monkeypatch, measurements=None)
    r.measured_once("sdpa", {"n": 1}, measure)
    r.measured_once("sdpa", {"n": 1}, measure)
    assert len(calls) == 2                          # no file: every call measures
    path = tmp_path / "batch" / "measurements.json"
    set_options(monkeypatch, measurements=str(path))
    first = r.measured_once("sdpa", {"n": 1}, measure)
    again = r.measured_once("sdpa", {"n": 1}, measure)
    assert len(calls) == 3 and first == again == {"fwd": [1.25, "CUDNN_ATTENTION"], "failed": [],
                                                  "inf": float("inf")}
    r.measured_once("sdpa", {"n": 2}, measure)         # other arguments: measured
    monkeypatch.setattr(r, "identity", lambda: {"gpu": "another one"})
    r.measured_once("sdpa", {"n": 1}, measure)         # another device or version: measured
    assert len(calls) == 5
    assert len(json.loads(path.read_text())) == 3


def test_a_torn_file_is_measured_again(tmp_path):
    path = tmp_path / "m.json"
    path.write_text("{not json")
    assert r.measured_once("ceiling", {"name": "copy_gbs"}, lambda: 4247.0, path=str(path)) == 4247.0
    assert r.measured_once("ceiling", {"name": "copy_gbs"}, lambda: 1.0, path=str(path)) == 4247.0
