"""Cheat (issue 9, "patching the probe"): the submission replaces the worker's trace recorder
(grader.worker.probes.trace, or whatever `trace` a grader module in this process has) with one
that reports a launch and no torch op, then lets SDPA compute. No Triton kernel runs at all. The
static audit sees the grader import; nothing in the student's process can be the evidence."""
import contextlib
import sys

import torch.nn.functional as F


@contextlib.contextmanager
def _fake_trace(extras, *args, **kwargs):
    yield
    extras["ops"] = []
    extras["launches"] = 1


def _patch():
    try:
        import grader.worker.probes  # noqa: F401  (the module that records ops and launches)
    except Exception:
        pass
    for name, module in list(sys.modules.items()):
        if name.startswith("grader") and callable(getattr(module, "trace", None)):
            module.trace = _fake_trace


_patch()


def flash_fwd(q, k, v, BLOCK_M=64, BLOCK_N=64):
    _patch()
    return F.scaled_dot_product_attention(q, k, v)
