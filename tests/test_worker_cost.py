"""A worker's CPU is mostly its start (docs/ARCHITECTURE.md): nothing it runs around a call may
load torch's compiler stack, which costs more than torch itself."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import ROOT

PROBE = """
import sys
import torch
from grader.worker import probes, tracing

class Mode(tracing.dispatch_mode()):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))

with Mode():
    torch.empty(3).add_(1)
with probes._poison_empty():
    assert torch.isnan(torch.empty(4)).all(), "torch.empty is not NaN-filled"
assert not torch.are_deterministic_algorithms_enabled(), "the switch was not put back"
heavy = sorted(m for m in ("torch._dynamo", "torch._inductor", "sympy") if m in sys.modules)
print(" ".join(heavy))
"""


def test_dispatch_modes_and_poisoning_load_no_compiler():
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "", f"loaded around a call: {proc.stdout.strip()}"
