"""The static audit (grader/judge/source/audit.py) flags what it must and nothing a correct
submission needs: every file of solutions/, the stubs, the correct variants (Triton tutorial
styles included) and the lesson's own code (tests/audit_lesson/, copied from the lesson's Build
It) pass it; each forbidden construct is flagged with its file and line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from grader.judge.source import audit

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ("online_softmax", "tiled_attention", "softmax_triton", "flash_triton", "bench_attn",
             "flash_decode", "flash_backward")
TRITON_FILES = {"softmax_triton", "flash_triton", "vector_add"}


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
def test_solutions_and_stubs_pass(folder):
    for exercise in EXERCISES:
        assert audit.audit(ROOT / folder, exercise) == [], exercise


def test_variants_and_lesson_code_pass():
    files = [*ROOT.glob("tests/exercises/*/variants/*/*.py"), *ROOT.glob("tests/audit_lesson/*.py")]
    assert len(files) >= 8
    for f in files:
        triton = f.stem in TRITON_FILES
        assert audit.audit_file(f, triton) == [], f
        if triton:   # the Triton rules are stricter; the lesson's kernels pass them too
            assert audit.audit_file(f, False) == [], f


CHEATS = {  # source -> what the finding must mention
    "import threading\n": "threading",
    "from concurrent.futures import ThreadPoolExecutor\n": "concurrent",
    "import subprocess\n": "subprocess",
    "import multiprocessing as mp\n": "multiprocessing",
    "import ctypes\n": "ctypes",
    "import os\nos.fork()\n": "os.fork",
    "import os\nos.execv('/bin/sh', [])\n": "os.execv",
    "from os import system\n": "system",
    "exec('x = 1')\n": "exec",
    "eval('1')\n": "eval",
    "compile('1', 'f', 'eval')\n": "compile",
    "__import__('grader')\n": "__import__",
    "import importlib\n": "importlib",
    "x = open('/proc/self/maps').read()\n": "open",
    "import pathlib\n": "pathlib",
    "import mmap\n": "mmap",
    "import io\n": "io",
    "import grader.worker.probes\n": "grader",
    "from grader.worker import probes\n": "grader",
    "import sys\nf = sys._getframe(1)\n": "_getframe",
    "import sys\nm = sys.modules['grader.worker.probes']\n": "sys.modules",
    "import inspect\n": "inspect",
    "import gc\n": "gc",
    "def f():\n    try:\n        1 / 0\n    except Exception as e:\n        return e.__traceback__.tb_frame.f_back\n": "tb_frame",
    "g = f.__globals__\n": "__globals__",
    "b = __builtins__\n": "__builtins__",
    "c = ().__class__.__bases__[0].__subclasses__()\n": "__subclasses__",
    "import torch\ntorch._C._set_dispatch_mode(None)\n": "_C",
    "from torch.utils._python_dispatch import _disable_current_modes\n": "_python_dispatch",
    "import triton.runtime.interpreter as i\n": "interpreter",
    "import triton\ntriton.runtime.interpreter.InterpreterBuilder.create_masked_load = None\n": "interpreter",
    "import torch\np = torch.multiprocessing.Process\n": "multiprocessing",
    "import torch\nf = torch.compile(torch.softmax)\n": "torch.compile",
    "from torch import compile as c\n": "import compile",
    "import torch\ntorch.ops.load_library('x.so')\n": "load_library",
}
TRITON_ONLY = {
    "def f(x):\n    return x.numpy()\n": "numpy",
    "def f(x):\n    return x.tolist()\n": "tolist",
    "import numpy as np\n": "numpy",
    "def f(x):\n    return x.data_ptr()\n": "data_ptr",
    "def f(x, name):\n    return getattr(x, name)\n": "getattr",
}


@pytest.mark.parametrize("source", list(CHEATS), ids=list(CHEATS.values()))
def test_cheat_constructs_are_flagged(source, tmp_path):
    (tmp_path / "online_softmax.py").write_text(source)
    findings = audit.audit(tmp_path, "online_softmax")
    assert findings, source
    text = audit.message(findings, "online_softmax")
    assert CHEATS[source] in text and "online_softmax.py:" in text, text


@pytest.mark.parametrize("source", list(TRITON_ONLY), ids=list(TRITON_ONLY.values()))
def test_tensor_escapes_are_flagged_in_triton_exercises(source, tmp_path):
    (tmp_path / "flash_triton.py").write_text(source)
    assert audit.audit(tmp_path, "flash_triton"), source


def test_imported_submission_files_are_audited(tmp_path):
    (tmp_path / "softmax_triton.py").write_text("from helper import go\n")
    (tmp_path / "helper.py").write_text("import threading\n")
    findings = audit.audit(tmp_path, "softmax_triton")
    assert [f.file for f in findings] == ["helper.py"]


def test_other_source_encodings_are_refused(tmp_path):
    (tmp_path / "online_softmax.py").write_bytes(b"# -*- coding: utf-7 -*-\nx = 1\n")
    findings = audit.audit(tmp_path, "online_softmax")
    assert findings and "utf-7" in findings[0].what
    (tmp_path / "online_softmax.py").write_bytes(b"x = '\xff'\n")
    assert audit.audit(tmp_path, "online_softmax")


def test_writing_a_result_file_is_allowed(tmp_path):
    (tmp_path / "bench_attn.py").write_text(textwrap.dedent("""\
        import json, os, sys, time
        with open("attn_bench.json", "w") as f:
            json.dump([], f)
        if os.environ.get("TRITON_INTERPRET") == "1":
            sys.exit(0)
        """))
    assert audit.audit(tmp_path, "bench_attn") == []


# flash_decode is mixed: merge_partials is NumPy, flash_decode a Triton wrapper (audit.MIXED_EXERCISES)
MIXED_HEAD = "import numpy as np\nimport torch\nimport triton\n\n\n"
MIXED_OK = MIXED_HEAD + textwrap.dedent("""
    def merge_partials(parts):
        m = np.max([p[0] for p in parts], axis=0)
        return np.asarray(parts[0][2]) * 0 + m

    def _launch(q):
        return torch.empty_like(q)

    def flash_decode(q, k_cache, v_cache, seq_lens, num_splits=None):
        top = int(seq_lens.max().item())
        return _launch(q)

    if __name__ == "__main__":
        print(flash_decode(*[torch.zeros(1)] * 4).numpy(), np.zeros(1))
""")
MIXED_CHEATS = {  # what flash_decode's side does -> what the finding must mention
    "return torch.from_numpy(np.zeros(3))": "NumPy in code the Triton function runs",
    "return torch.from_numpy(merge_partials(q))": "NumPy in code the Triton function runs",
    "return torch.tensor(q.cpu().numpy())": ".numpy",
    "return getattr(q, 'num' + 'py')()": "computed at run time",
}


def _mixed(tmp_path, source):
    (tmp_path / "flash_decode.py").write_text(source)
    return " ".join(str(f) for f in audit.audit(tmp_path, "flash_decode"))


def test_mixed_file_allows_numpy_in_its_numpy_part(tmp_path):
    assert _mixed(tmp_path, MIXED_OK) == ""


@pytest.mark.parametrize("body", sorted(MIXED_CHEATS))
def test_mixed_file_refuses_numpy_on_the_triton_path(body, tmp_path):
    source = MIXED_OK.replace("    return _launch(q)", "    " + body)
    assert source != MIXED_OK
    assert MIXED_CHEATS[body] in _mixed(tmp_path, source)


def test_mixed_file_numpy_part_may_not_patch_the_triton_part(tmp_path):
    for patch in ("torch.empty_like = lambda q: q", "global _launch", "setattr(torch, 'x', 1)"):
        source = MIXED_OK.replace("    m = np.max", f"    {patch}\n    m = np.max")
        assert "NumPy part" in _mixed(tmp_path, source), patch
    # module-level code is a root: it is audited under the Triton rules
    assert "NumPy in code" in _mixed(tmp_path, MIXED_OK + "\nflash_decode = merge_partials\n")
