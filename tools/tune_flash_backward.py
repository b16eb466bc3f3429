"""Tile sweep for solutions/flash_backward.py on a CUDA GPU: which (BLOCK_M, BLOCK_N, num_warps,
num_stages) each kernel should default to on this device, against the fastest SDPA backend.

    python -m tools.tune_flash_backward [--out DIR] [--n 4096 8192] [--quick]

Times each kernel alone with triton.testing.do_bench (B = 1, H = 32, D = 128, fp16, causal and
not), checks every configuration's output once against the defaults, and writes the table
(Markdown) and the raw numbers (JSON) under DIR. FLOPs: forward 4*B*H*N^2*D, backward 2.5x that,
halved when causal.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path

from tools import solution

FWD = [(64, 64, 4, 3), (64, 128, 4, 3), (128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 2),
       (128, 128, 8, 3), (128, 64, 8, 4), (128, 128, 4, 3), (64, 128, 4, 4)]
# backward: (BLOCK_M, BLOCK_N, num_warps, num_stages) for dK/dV (BLOCK_N keys held, BLOCK_M
# query rows per step) and for dQ (BLOCK_M query rows held, BLOCK_N keys per step)
DKDV = [(32, 32, 4, 2), (32, 128, 4, 2), (32, 128, 4, 3), (64, 128, 8, 2), (32, 128, 8, 3),
        (64, 64, 4, 2), (64, 128, 4, 2), (16, 128, 4, 3)]
DQ = [(32, 32, 4, 2), (128, 32, 4, 2), (128, 32, 4, 3), (128, 64, 8, 2), (128, 32, 8, 3),
      (64, 64, 4, 2), (128, 64, 4, 2), (128, 16, 4, 3)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "reports/tune"))
    ap.add_argument("--n", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    import torch

    fb = solution.load("flash_backward")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    B, H, D = 1, 32, 128
    rows, raw = [], []
    for N in args.n:
        torch.manual_seed(0)
        q, k, v, do = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(4))
        for causal in (False, True):
            case = Case(f"N={N}{' causal' if causal else ''}", 4 * B * H * N * N * D * (0.5 if causal else 1.0),
                        causal, args.quick, rows, raw)
            sdpa_rows(case, q, k, v, do)
            o, lse = forward_rows(case, fb, q, k, v)
            backward_rows(case, fb, q, k, v, o, lse, do)
            print("\n".join(rows[-40:]), flush=True)
    (out_dir / "tune.md").write_text("| case | what | time | |\n|---|---|---|---|\n" + "\n".join(rows) + "\n")
    (out_dir / "tune.json").write_text(json.dumps(raw, indent=1))


@dataclass
class Case:
    """One (N, causal) of the sweep: its label, its forward FLOPs, and where rows go."""
    tag: str
    flops: float
    causal: bool
    quick: bool
    rows: list
    raw: list


def bench(fn) -> float:
    import triton

    return triton.testing.do_bench(fn, warmup=25, rep=100)


def sdpa_rows(c: Case, q, k, v, do) -> None:
    """Each SDPA backend, forward and backward."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
                    SDPBackend.EFFICIENT_ATTENTION):
        try:
            with sdpa_kernel(backend):
                ms_f = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=c.causal))
                leaves = [t.clone().requires_grad_() for t in (q, k, v)]
                o = F.scaled_dot_product_attention(*leaves, is_causal=c.causal)
                ms_b = bench(lambda: torch.autograd.grad(o, leaves, do, retain_graph=True))
        except RuntimeError as e:
            c.raw.append({"tag": c.tag, "sdpa": backend.name, "error": str(e)[:200]})
            continue
        c.raw.append({"tag": c.tag, "sdpa": backend.name, "fwd_ms": ms_f, "bwd_ms": ms_b})
        c.rows.append(f"| {c.tag} | SDPA {backend.name} | fwd {ms_f:.3f} ms {c.flops / ms_f / 1e9:.0f} TF | "
                      f"bwd {ms_b:.3f} ms {2.5 * c.flops / ms_b / 1e9:.0f} TF |")


def forward_rows(c: Case, fb, q, k, v):
    """The solution's forward at each tile; returns the defaults' (o, lse) as the reference."""
    ref_o, ref_lse = fb.flash_fwd(q, k, v, causal=c.causal, BLOCK_M=64, BLOCK_N=64)
    for bm, bn, w, s in FWD[:3] if c.quick else FWD:
        try:
            o, lse = fb.flash_fwd(q, k, v, causal=c.causal, BLOCK_M=bm, BLOCK_N=bn,
                                  num_warps=w, num_stages=s)
            err = float((o.float() - ref_o.float()).abs().max())
            ms = bench(lambda: fb.flash_fwd(q, k, v, causal=c.causal, BLOCK_M=bm, BLOCK_N=bn,
                                            num_warps=w, num_stages=s))
        except Exception as e:  # noqa: BLE001 - out of resources etc.: recorded
            c.raw.append({"tag": c.tag, "fwd": [bm, bn, w, s], "error": str(e)[:200]})
            continue
        c.raw.append({"tag": c.tag, "fwd": [bm, bn, w, s], "ms": ms, "err": err})
        c.rows.append(f"| {c.tag} | fwd {bm}x{bn} w{w} s{s} | {ms:.3f} ms {c.flops / ms / 1e9:.0f} TF | err {err:.1e} |")
    return ref_o, ref_lse


def backward_rows(c: Case, fb, q, k, v, o, lse, do) -> None:
    """The backward kernels at each tile, the defaults' answer as the reference; then the
    preprocess kernel and flash_bwd with its defaults."""
    import torch
    import triton

    B, H, N, D = q.shape
    ref = fb.flash_bwd(q, k, v, o, lse, do, causal=c.causal)
    qq, kk, vv, oo, dd = (t.reshape(B * H, N, D) for t in (q, k, v, o, do))
    ll = lse.reshape(B * H, N)
    delta = torch.empty_like(ll)

    def preprocess():
        fb._bwd_preprocess[(triton.cdiv(N, 64), B * H)](oo, dd, delta, N, oo.stride(0), oo.stride(1),
                                                         BLOCK_M=64, D=D)

    preprocess()
    dq, dk, dv = (torch.empty_like(qq) for _ in range(3))
    scale = D ** -0.5
    for label, configs, kernel, grid_of, outs in (
            ("dkdv", DKDV, fb._bwd_dkdv, lambda bm, bn: (triton.cdiv(N, bn), B * H), (dk, dv)),
            ("dq", DQ, fb._bwd_dq, lambda bm, bn: (triton.cdiv(N, bm), B * H), (dq,))):
        want = (ref[1], ref[2]) if label == "dkdv" else (ref[0],)
        for bm, bn, w, s in configs[:3] if c.quick else configs:
            def launch():
                kernel[grid_of(bm, bn)](qq, kk, vv, dd, ll, delta, *outs, N, qq.stride(0),
                                        qq.stride(1), scale, CAUSAL=c.causal, BLOCK_M=bm,
                                        BLOCK_N=bn, D=D, num_warps=w, num_stages=s)
            try:
                launch()
                torch.cuda.synchronize()
                err = max(float((a.reshape(want[i].shape).float() - want[i].float()).abs().max())
                          for i, a in enumerate(outs))
                ms = bench(launch)
            except Exception as e:  # noqa: BLE001
                c.raw.append({"tag": c.tag, label: [bm, bn, w, s], "error": str(e)[:200]})
                continue
            c.raw.append({"tag": c.tag, label: [bm, bn, w, s], "ms": ms, "err": err})
            c.rows.append(f"| {c.tag} | {label} {bm}x{bn} w{w} s{s} | {ms:.3f} ms | err {err:.1e} |")
    pre = bench(preprocess)
    c.raw.append({"tag": c.tag, "preprocess_ms": pre})
    c.rows.append(f"| {c.tag} | preprocess | {pre:.3f} ms | |")
    ms = bench(lambda: fb.flash_bwd(q, k, v, o, lse, do, causal=c.causal))
    c.raw.append({"tag": c.tag, "flash_bwd_default_ms": ms})
    c.rows.append(f"| {c.tag} | flash_bwd defaults | {ms:.3f} ms {2.5 * c.flops / ms / 1e9:.0f} TF | |")


if __name__ == "__main__":
    main()
