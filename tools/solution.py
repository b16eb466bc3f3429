"""Import one of solutions/*.py as a module, for the GPU tools that time the reference kernels."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load(name: str, path: Path | None = None):
    """The module solutions/<name>.py (or the file at path), executed fresh."""
    path = path or ROOT / "solutions" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"solution_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
