"""Tile sweep for solutions/flash_backward.py on a CUDA GPU: which (BLOCK_M, BLOCK_N, num_warps,
num_stages) each kernel should default to on this device, against the fastest SDPA backend.

    python -m tools.tune_flash_backward [--out DIR] [--n 4096 8192] [--quick]

Times each kernel alone with triton.testing.do_bench (B = 1, H = 32, D = 128, fp16, causal and
not), checks every configuration's output once against the defaults, and writes the table
(Markdown) and the raw numbers (JSON) under DIR. FLOPs: forward 4*B*H*N^2*D, backward 2.5x that,
halved when causal.

    python -m tools.tune_flash_backward --hopper [--out DIR] [--n 2048 4096 8192 16384]
    TRITON_INTERPRET=1 python -m tools.tune_flash_backward --hopper --check   # CPU tensors

--hopper (issue 56): the candidate non-causal forward `_flash_fwd_ws` below, which uses what
Triton 3.5+ offers on Hopper, at each (tile, warp_specialize), fp16 and bf16, against the fastest
SDPA backend's forward and the solution's flash_fwd, in one process. Each configuration's o is
checked against the solution's and its logsumexp against float64 on two heads before it is
timed (do_bench, as above). It moves into solutions/flash_backward.py only once it measures faster.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path

import triton
import triton.language as tl

from tools import solution

try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:   # Triton before 3.4: no host-side tensor descriptors
    TensorDescriptor = None

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
    ap.add_argument("--hopper", action="store_true", help="the warp-specialized candidate forward")
    ap.add_argument("--check", action="store_true", help="with --hopper: only check it (CPU ok)")
    args = ap.parse_args()
    if args.hopper:
        return hopper_main(args)
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


# ------------------------------------------------------------------------------ --hopper
# FlashAttention-3's first idea, asynchrony, as stock Triton (3.5 and later) exposes it on Hopper:
#   - tensor descriptors: each K and V tile is one bulk copy by the copy engine (TMA) into shared
#     memory, described once on the host (base, shape, strides, tile): no per-thread addresses;
#   - warp specialization, tl.range(..., warp_specialize=True): Triton splits the loop between a
#     producer warp that only issues those copies, num_stages tiles ahead, and consumer warps that
#     only do the two matmuls and the softmax, so the loads of the next key blocks overlap the
#     math of this one (FlashAttention-3's producer and consumer warps).
# As Triton's own 06-fused-attention tutorial does for the non-causal forward on Hopper. The
# descriptors are made on the host (triton.tools.tensor_descriptor), as the tutorial does where
# the GPU supports them: the grader's replay rebuilds those (grader/worker/replay.py), while
# descriptors made in the kernel (tl.make_tensor_descriptor) need a scratch allocator set with
# triton.set_allocator in every process that launches the kernel.


@triton.jit
def _flash_fwd_ws(desc_q, desc_k, desc_v, desc_o, LSE, N, qk_scale,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr,
                  WARP_SPECIALIZE: tl.constexpr):
    """The solution's _flash_fwd, non-causal, N a multiple of BLOCK_M and BLOCK_N (no mask). The
    descriptors view q, k, v, o as (B*H*N, D): head pid_bh owns rows pid_bh*N .. pid_bh*N + N - 1."""
    pid_m = tl.program_id(0)            # which query block
    pid_bh = tl.program_id(1)           # which (batch, head)
    row0 = pid_bh * N
    q = desc_q.load([row0 + pid_m * BLOCK_M, 0])                         # (BLOCK_M, D)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running max (log2 units)
    l_i = tl.zeros([BLOCK_M], tl.float32)                # running sum of exp2(s - m_i)
    acc = tl.zeros([BLOCK_M, D], tl.float32)             # running sum of exp2(s - m_i) * v
    for start in tl.range(0, N, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        k = desc_k.load([row0 + start, 0])                               # (BLOCK_N, D), by TMA
        s = tl.dot(q, k.T)
        # the block rule, the scale folded into the exponent's multiply-add
        m_new = tl.maximum(m_i, tl.max(s, axis=1) * qk_scale)
        p = tl.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = desc_v.load([row0 + start, 0])                               # (BLOCK_N, D), by TMA
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    acc = acc / l_i[:, None]
    desc_o.store([row0 + pid_m * BLOCK_M, 0], acc.to(q.dtype))            # o has q's dtype
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    tl.store(LSE + pid_bh * N + rows, (m_i + tl.log2(l_i)) * 0.6931471805599453)   # natural log


def flash_fwd_ws(q, k, v, tiles, warp_specialize=True):
    """flash_fwd(q, k, v)'s (o, lse) from _flash_fwd_ws; q, k, v (B, H, N, D), N a multiple of
    both tiles; tiles = (BLOCK_M, BLOCK_N, num_warps, num_stages)."""
    import torch

    B, H, N, D = q.shape
    BLOCK_M, BLOCK_N, num_warps, num_stages = tiles
    assert N % BLOCK_M == 0 and N % BLOCK_N == 0, f"N = {N}: not a multiple of the tiles {tiles}"
    q, k, v = (t.reshape(B * H * N, D).contiguous() for t in (q, k, v))
    o = torch.empty_like(q)
    lse = torch.empty((B * H, N), device=q.device, dtype=torch.float32)
    descs = [TensorDescriptor(t, shape=[B * H * N, D], strides=[D, 1], block_shape=[rows, D])
             for t, rows in ((q, BLOCK_M), (k, BLOCK_N), (v, BLOCK_N), (o, BLOCK_M))]
    _flash_fwd_ws[(N // BLOCK_M, B * H)](*descs, lse, N, 1.4426950408889634 / D ** 0.5,
                                         BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D,
                                         WARP_SPECIALIZE=warp_specialize,
                                         num_warps=num_warps, num_stages=num_stages)
    return o.reshape(B, H, N, D), lse.reshape(B, H, N)


# (BLOCK_M, BLOCK_N, num_warps, num_stages), each with and without warp specialization
HOPPER = [(128, 64, 4, 2), (128, 64, 4, 3), (128, 128, 4, 2), (128, 128, 4, 3), (128, 64, 8, 2),
          (128, 64, 8, 3), (128, 128, 8, 2), (128, 128, 8, 3)]


def references(fb, q, k, v):
    """The solution's flash_fwd o, and the logsumexp of heads 0 and 1 of batch 0 in float64."""
    import torch

    s = (q[0, :2].double() @ k[0, :2].double().transpose(-1, -2)) * q.shape[-1] ** -0.5
    return fb.flash_fwd(q, k, v)[0], torch.logsumexp(s, -1)


def errors(o, lse, refs) -> tuple[float, float]:
    """Max abs error of o against the solution's and of lse against float64 (two heads)."""
    return (float((o.float() - refs[0].float()).abs().max()),
            float((lse[0, :2].double() - refs[1]).abs().max()))


def hopper_main(args):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    fb = solution.load("flash_backward")
    if args.check:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        torch.manual_seed(0)
        q, k, v = (torch.randn(1, 2, 256, 64, device=device, dtype=torch.float16) for _ in range(3))
        refs = references(fb, q, k, v)
        for ws in (False, True):
            err_o, err_lse = errors(*flash_fwd_ws(q, k, v, (64, 32, 4, 2), ws), refs)
            assert err_o < 2e-2 and err_lse < 1e-3, f"warp_specialize={ws}: {err_o:.1e} {err_lse:.1e}"
            print(f"  ok  _flash_fwd_ws N=256 D=64 warp_specialize={ws}: o {err_o:.1e}, "
                  f"lse {err_lse:.1e}")
        return
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}",
          flush=True)
    B, H, D = 1, 32, 128
    rows = ["| case | what | TFLOP/s | of the fastest SDPA | error o / lse |", "|---|---|---|---|---|"]
    raw = []
    for dtype in (torch.float16, torch.bfloat16):
        for N in args.n:
            torch.manual_seed(0)
            q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=dtype) for _ in range(3))
            flops = 4 * B * H * N * N * D
            tag = f"{str(dtype)[6:]} N={N}"
            sdpa = {}
            for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
                try:
                    with sdpa_kernel(backend):
                        sdpa[backend.name] = bench(lambda: F.scaled_dot_product_attention(q, k, v))
                except RuntimeError:
                    continue
            best = min(sdpa.values())
            timed = {f"SDPA {name}": (ms, "") for name, ms in sdpa.items()}
            timed["flash_fwd (solution)"] = (bench(lambda: fb.flash_fwd(q, k, v)), "")
            refs = references(fb, q, k, v)
            for tiles in HOPPER[:3] if args.quick else HOPPER:
                for ws in (True, False):
                    label = f"_flash_fwd_ws {tiles[0]}x{tiles[1]} w{tiles[2]} s{tiles[3]} ws={ws}"
                    try:
                        err = errors(*flash_fwd_ws(q, k, v, tiles, ws), refs)
                        assert err[0] < 2e-2 and err[1] < 1e-3, f"error {err}"
                        ms = bench(lambda: flash_fwd_ws(q, k, v, tiles, ws))
                    except Exception as e:  # noqa: BLE001 - out of resources, no WS: recorded
                        raw.append({"tag": tag, "what": label, "error": str(e)[:300]})
                        rows.append(f"| {tag} | {label} | {type(e).__name__} | | |")
                        print(rows[-1], str(e)[:200], flush=True)
                        continue
                    timed[label] = (ms, f"{err[0]:.1e} / {err[1]:.1e}")
            for label, (ms, err) in timed.items():
                raw.append({"tag": tag, "what": label, "ms": ms, "of_sdpa": best / ms})
                rows.append(f"| {tag} | {label} | {flops / ms / 1e9:.0f} | {best / ms:.2f} | {err} |")
                print(rows[-1], flush=True)
            del q, k, v
            torch.cuda.empty_cache()
    (out_dir / "hopper.md").write_text("\n".join(rows) + "\n")
    (out_dir / "hopper.json").write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
