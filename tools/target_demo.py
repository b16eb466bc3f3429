"""Does a tile choice fit the DGX Spark? The grader's own probe, on one GPU, in one table.

    python -m tools.target_demo [--target gb10] [--out DIR]

Launches the forward kernel of solutions/flash_backward.py (and the core solutions/flash_triton.py)
at D = 128, fp16, with Hopper-sized tiles (BLOCK_M = BLOCK_N = 128, num_stages = 3; 64 x 128 x 3,
the fastest on an H200) and with each of the target profile's own tile shapes, through the same
worker probe the grader uses (grader.worker.probes.trace with opts["target"]): each launch runs
here, and its kernel is also compiled for the target (sm_121 for the Spark) without launching.
Prints, per launch: the kernel and its constexprs, the shared memory per block on this device and
on the target, and whether it fits the target's limit (101376 bytes on the Spark).

Without CUDA nothing is launched: Triton compiles each kernel as if on an H200 (sm_90) and for the
target, which is what tests/test_target.py checks. Writes target_demo.txt and target_demo.json
under --out, else under $OUT when that is set.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.judge.machine import devices, target  # noqa: E402
from grader.worker import probes  # noqa: E402

# BLOCK_M, BLOCK_N, num_warps, num_stages: tiles an H200 can run (128 x 64 x 8 x 3 is what
# solutions/flash_backward.py picks on a GPU with 200+ KB of shared memory per block)
HOPPER_SIZED = ((128, 128, 8, 3), (64, 128, 4, 3), (128, 64, 8, 3))


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def stand_in_driver():
    """No GPU: a driver that answers "device 0, an H200 (sm_90)" so Triton compiles (no launch);
    the real one is put back afterwards."""
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver

    class HereDriver:
        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

    saved = driver._active
    driver.set_active(HereDriver())
    try:
        yield
    finally:
        driver._active = saved


def launch(module, name: str, cfg, cuda: bool, spec: dict) -> dict:
    """One forward launch through the probe; its record, or the error the launch raised here."""
    import torch
    from triton.runtime.jit import JITFunction

    bm, bn, warps, stages = cfg
    B, H, N, D = 1, 4, 1024, 128
    device = "cuda" if cuda else "cpu"
    q = torch.randn(B, H, N, D, dtype=torch.float16, device=device)
    extras: dict = {}
    try:
        with probes.trace(extras, spec):
            if cuda:
                module.flash_fwd(q, q, q, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps,
                                 num_stages=stages)
                torch.cuda.synchronize()
            else:   # compile only: the same arguments the wrapper passes
                flat = q.reshape(B * H, N, D)
                args = [flat, flat, flat, torch.empty_like(flat)]
                consts = {"BLOCK_M": bm, "BLOCK_N": bn, "D": D}
                if name == "flash_backward":
                    args.append(torch.empty(B * H, N, dtype=torch.float32))
                    consts["CAUSAL"] = False
                args += [N, flat.stride(0), flat.stride(1), 0.1]
                JITFunction.run(module._flash_fwd, *args, grid=(1,), warmup=True, **consts,
                                num_warps=warps, num_stages=stages)
    except Exception as e:  # noqa: BLE001 - e.g. out of resources here too (256 x 256)
        return {"exercise": name, "config": list(cfg), "error_here": f"{type(e).__name__}: {e}"[:300]}
    recs = [r for r in extras.get("compiled", []) if r.get("name") == "_flash_fwd"]
    return {"exercise": name, "config": list(cfg), "record": recs[0] if recs else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="gb10")
    ap.add_argument("--out", default=os.environ.get("OUT"))
    args = ap.parse_args(argv)
    import torch

    profile = target.lookup(args.target)
    spec = target.spec(profile)
    cuda = torch.cuda.is_available()
    if cuda:
        here = f"{torch.cuda.get_device_name()} (sm_{''.join(map(str, torch.cuda.get_device_capability()))})"
    else:
        driver = stand_in_driver()   # for the rest of this run (held: collected, it would restore)
        driver.__enter__()
        here = "no GPU: compiled as if on sm_90, nothing launched"
    import triton

    first = (target.header(profile, here) if cuda else
             f"target {target.short(profile)} (sm_{profile.arch}): {here}")
    lines = [first,
             f"triton {triton.__version__}, torch {torch.__version__}; limit on the target: "
             f"{profile.smem_per_block} bytes of shared memory per block", ""]
    head = (f"{'exercise':<15} {'kernel and tile':<56} {'shared here':>11} {'on target':>10} "
            f"{'arch':>6}  fits?")
    lines += [head, "-" * len(head)]
    rows = []
    configs = [(c, "Hopper-sized") for c in HOPPER_SIZED]
    configs += [(c, f"{target.short(profile)} profile") for c in profile.flash_configs]
    for name, path in (("flash_backward", "solutions/flash_backward.py"),
                       ("flash_triton", "solutions/flash_triton.py")):
        module = load(ROOT / path, f"demo_{name}")
        for cfg, why in configs:
            row = launch(module, name, cfg, cuda, spec)
            row["why"] = why
            rows.append(row)
            tile = "BLOCK_M={}, BLOCK_N={}, warps={}, stages={}".format(*cfg)
            rec = row.get("record") or {}
            tgt = rec.get("target") or {}
            if "error_here" in row:
                lines.append(f"{name:<15} {'_flash_fwd ' + tile:<56} {'fails here':>11}: "
                             f"{row['error_here'][:80]}")
                continue
            shared = tgt.get("shared")
            fits = "?" if shared is None else ("yes" if shared <= profile.smem_per_block else
                                              "NO: out of resources on the target (Break It 5)")
            lines.append(f"{name:<15} {'_flash_fwd ' + tile:<56} {rec.get('shared', '?'):>11} "
                         f"{shared if shared is not None else '?':>10} "
                         f"{'sm_' + str(tgt.get('arch', '?')):>6}  {fits} [{why}]"
                         + (f" ({tgt['error']})" if tgt.get("error") else ""))
    text = "\n".join(lines)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "target_demo.txt").write_text(text + "\n")
        (out / "target_demo.json").write_text(json.dumps(
            {"target": profile.key, "limit": profile.smem_per_block, "device": here,
             "rows": rows}, indent=1) + "\n")
        print(f"\nwritten: {out / 'target_demo.txt'}, {out / 'target_demo.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
