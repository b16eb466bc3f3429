"""Inputs that record how student code reads them, built inside the worker, and the list of
those built for the call being run.

    Trusted("read_recorder", key="x", params={"values": x})   # the trusted side asks for one
    online_max_sum(x)                                          # the student reads it
    extras["reads"] == {"n": 1000, "passes": 1, "whole": 0, ...}

Two kinds: `read_recorder.ReadRecorder`, a 1-D array stand-in whose reads are ranges of
elements, in passes (online_softmax's one pass; with keep_shape, ranges of rows:
attention_backward's block skipping), and `row_recorder.RowRecorder`, a real (N, d) ndarray
that logs which rows each NumPy operation reads (tiled_attention's K and V). Each registers
itself in `LIVE` when built; the probes collect their logs after the call (`collect`).

The logs live in the worker, next to student code, so they are evidence, not a verdict, and a
submission can tell it is watched: they grade the lesson's idea in honest work.
"""

from __future__ import annotations

import numpy as np

LIVE: list = []    # recorders of the call being run; probes.around_call collects their logs
# NumPy functions that look at an array's shape or dtype and read none of its values
METADATA_ONLY = {np.result_type, np.shape, np.ndim, np.size, np.iscomplexobj, np.isrealobj,
                 np.empty_like, np.zeros_like, np.ones_like, np.full_like, np.can_cast,
                 np.min_scalar_type}


def collect() -> list[dict]:
    """Logs of the recorders built for this call, in the order they were built; forgets them."""
    logs = [r._log.summary() for r in LIVE]
    LIVE.clear()
    return logs
