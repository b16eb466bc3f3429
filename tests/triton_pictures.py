"""The pictures of the Triton core exercises' known mistakes, computed under the interpreter:

    TRITON_INTERPRET=1 python -m tests.triton_pictures softmax_triton > pictures.json

For each mutant of the exercise (tests/exercises/<exercise>/mutants.py) it runs the mutated
solution on the inputs of its case (CASES: inputs that show where the mistake damages the output)
on CPU tensors and prints {mutant: {"case", "picture": assert_close's picture or None when the
answer is right, "error": why nothing could be compared}} as JSON. tests/test_pages.py judges
what each picture marks. A process of its own: the interpreter must be chosen before Triton is
imported, and the pytest process may have imported it already.
"""

from __future__ import annotations

import importlib
import json
import sys
import types

import numpy as np

from grader.judge.answers.compare import CheckFailed, assert_close
from tests.helpers import SOLUTIONS

ROWS, COLS = 8, 100           # softmax: a row length that is not a power of two (padded lanes)
FAR = slice(0, 3)             # the rows whose values are past exp's range in float32
N, D, BLOCK = 100, 16, 32     # attention: N not a multiple of the key block


def softmax_case(case: str, torch, rng):
    x = torch.from_numpy(rng.standard_normal((ROWS, COLS)).astype(np.float32))
    if case == "negative":      # every value below 0: padded lanes read as 0 would hold the max
        x = -(x.abs() + 1.0)
    elif case == "far":         # the FAR rows near 200: exp overflows unless the max is taken off
        x[FAR] += 200.0
    elif case == "strided":     # rows of a wider tensor: the row stride is not n_cols
        wide = torch.from_numpy(rng.standard_normal((ROWS, COLS + 60)).astype(np.float32))
        x = wide[:, :COLS]
    return (x,), {}, torch.softmax(x.double(), dim=1).numpy(), None


def attention_case(case: str, torch, rng):
    q, k, v = (torch.from_numpy(rng.standard_normal((1, 1, N, D)).astype(np.float32)) for _ in range(3))
    if case == "moved":         # every row's max in key block 0, except rows 64.., whose moves late
        q[..., :2], k[..., :2] = 0.0, 0.0
        q[..., 0], k[..., 0, 0] = 1.0, 6.0 * D ** 0.5
        q[..., 64:, 1], k[..., -3:, 1] = 1.0, 12.0 * D ** 0.5
    elif case in ("far", "far_negative"):   # the FAR rows' scores near +-400: past exp's range
        k[..., 0] = 1.0
        q[..., 0] = 0.0
        q[..., FAR, 0] = (400.0 if case == "far" else -400.0) * D ** 0.5
    s = (q.double() @ k.double().transpose(-2, -1)) * D ** -0.5
    expected = (torch.softmax(s, dim=-1) @ v.double()).numpy()
    return (q, k, v), {"BLOCK_M": BLOCK, "BLOCK_N": BLOCK}, expected, (BLOCK, None)


# mutant -> its inputs; a mutant not here runs on "plain" inputs. OUT_OF_BOUNDS: a load or store
# past the tensor, which the interpreter makes in this very process (it can corrupt the heap):
# not run here; the grader runs it in a worker, and its bounds checks name it, not a picture
OUT_OF_BOUNDS = "out_of_bounds"
CASES = {
    "softmax_triton": (softmax_case, "softmax", {
        "padding_loaded_as_zero": "negative", "load_without_mask_or_other": "negative",
        "no_max_subtraction": "far", "row_stride_ignored": "strided",
        "one_stride_for_both": OUT_OF_BOUNDS, "load_without_mask": OUT_OF_BOUNDS,
        "load_without_mask_then_where": OUT_OF_BOUNDS, "store_without_mask": OUT_OF_BOUNDS}),
    "flash_triton": (attention_case, "flash_fwd", {
        "acc_not_rescaled": "moved", "no_max_subtraction": "far",
        "running_max_starts_at_zero": "far_negative", "kv_loads_unmasked": OUT_OF_BOUNDS,
        "v_load_unmasked": OUT_OF_BOUNDS, "k_load_unmasked_then_where": OUT_OF_BOUNDS,
        "o_store_unmasked": OUT_OF_BOUNDS, "assumes_full_blocks": OUT_OF_BOUNDS}),
}


def main(exercise: str) -> int:
    import torch

    make, fn, cases = CASES[exercise]
    source = (SOLUTIONS / f"{exercise}.py").read_text()
    out = {}
    for mutant in importlib.import_module(f"tests.exercises.{exercise}.mutants").MUTANTS:
        name = mutant.name
        case = cases.get(name, "plain")
        if case == OUT_OF_BOUNDS:
            out[name] = {"case": case, "picture": None, "error": ""}
            continue
        module = types.ModuleType(f"mutant_{name}")
        exec(compile(mutant.apply(source), f"{exercise}.py", "exec"), module.__dict__)
        args, kwargs, expected, grid = make(case, torch, np.random.default_rng(55))
        try:
            got = getattr(module, fn)(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the mistake's own failure
            out[name] = {"case": case, "picture": None, "error": f"{type(e).__name__}: {e}"[:200]}
            continue
        picture = None
        try:
            assert_close(got.detach().numpy(), expected, dtype="float32", grid=grid)
        except CheckFailed as e:
            picture = e.picture
        out[name] = {"case": case, "picture": picture, "error": ""}
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
