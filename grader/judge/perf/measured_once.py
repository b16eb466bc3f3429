"""The grader's own measurements (SDPA baselines, the device's ceilings), measured once and kept
for the rest of a batch: every submission is compared with the same denominators, and none pays
for measuring them again.

    best = measured_once("sdpa", {"shape": [1, 32, 8192, 128], "causal": False}, measure)

With --measurements <file> (`batch` gives <out>/measurements.json) a value measured
once for this device and software (GPU name and capability, torch, CUDA and Triton versions)
is read from the file; without it, every call measures. The file is the grader's: no student
process can reach the batch's output folder (the sandbox shows a worker only its own scratch).
A lock keeps the grades of a batch that run at once (`--jobs`) from writing over each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Callable

from grader import options

def identity() -> dict:
    """What a measurement depends on besides its own arguments."""
    import torch

    who = {"torch": torch.__version__, "cuda": str(torch.version.cuda)}
    with contextlib.suppress(ImportError):
        import triton

        who["triton"] = triton.__version__
    if torch.cuda.is_available():
        who["gpu"] = torch.cuda.get_device_name()
        who["capability"] = list(torch.cuda.get_device_capability())
    return who


def measured_once(kind: str, args: dict, measure: Callable[[], object], path: str | None = None):
    """measure()'s value, from the file when this (kind, args, identity) was measured before."""
    path = path if path is not None else options.current().measurements
    if not path:
        return measure()
    key = json.dumps({"kind": kind, "args": args, **identity()}, sort_keys=True)
    with _locked(Path(path)) as table:
        if key in table:
            return table[key]
    value = measure()                     # measured outside the lock: it takes seconds
    with _locked(Path(path)) as table:
        table.setdefault(key, json.loads(json.dumps(value)))
        return table[key]


@contextlib.contextmanager
def _locked(path: Path):
    """The file's table, under an exclusive lock; written back (atomically) when changed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(path.suffix + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            table = json.loads(path.read_text()) if path.exists() else {}
        except (OSError, ValueError):
            table = {}                    # a torn or foreign file: measure again
        before = dict(table)
        yield table
        if table != before:
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_text(json.dumps(table, indent=1, sort_keys=True))
            os.replace(tmp, path)
