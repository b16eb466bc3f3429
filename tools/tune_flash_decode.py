"""Where flash_decode's time goes at 8 KV heads and L = 8K, and whether one launch for the split
and the merge would close its gap to the copy bandwidth (issue 56), on a CUDA GPU.

    python -m tools.tune_flash_decode [--out DIR] [--cases 8:8192 8:16384 32:8192 8:32768]
    TRITON_INTERPRET=1 python -m tools.tune_flash_decode --check    # the one-launch kernel, CPU

B = 8, Hq = 32, D = 128, fp16, as tools.bench_refs' decode rows; GB/s = 2 * B * Hkv * L * D * 2
bytes of K and V / time, as a fraction of the copy bandwidth (grader.judge.machine.ceilings, as
bench_refs). Every variant's output is checked against a float64 reference of sequence 0 before
it is timed, and each is timed three ways:
  do_bench    triton.testing.do_bench's median (bench_refs' number). Its L2 flush writes zeros
              over 256 MB before each call: the dirty lines it leaves in L2 (up to 50 MB on an
              H100) may be written back to HBM while the timed kernel reads, and a 268 MB read
              (Hkv = 8, L = 8K) would pay for that more than a 1 GB one;
  read flush  the same 256 MB flush done by reading (a sum), so nothing is left to write back;
  loop        200 calls back to back, wall time / 200: what a decode loop sees (no flush).
Variants:
  two launches    flash_decode as it is: _decode_split, then _decode_merge;
  graphed         the same two launches replayed from a CUDA graph (no Python between them);
  split only      _decode_split alone, buffers made once: the merge's share is the difference;
  one launch      _decode_one_launch below: _decode_split inlined, then the last program of each
                  (sequence, KV head) to finish, counted by an atomic ticket, merges the splits
                  ("last block done": no program waits, so it runs under the interpreter too);
  splits=n        both at other split counts;
and SDPA's fastest backend with enable_gqa. The host time per call of each wrapper is measured
at L = 256, where the GPU has almost nothing to do.

Why one launch is a candidate here and not in solutions/flash_decode.py: the corpora under
tests/exercises/flash_decode/ edit the solution by text. decode_fp16_elementwise_qk replaces
_decode_split with a kernel of one program per query head and its launch grid with (num_splits,
Hq, B); decode_merge_in_torch replaces the merge launch. A solution whose CUDA path skips those
launches would leave both corpora testing code that no longer runs there.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import time
from pathlib import Path

import triton
import triton.language as tl

from tools import solution

fd = solution.load("flash_decode")
_decode_split = fd._decode_split      # called inline by _decode_one_launch (a global of this module)


@triton.jit
def _merge_splits(MidM, MidL, MidAcc, O, row, b, h, stride_ob, stride_oh, num_splits,
                  BLOCK_S: tl.constexpr, D: tl.constexpr):
    """_decode_merge's rule for one (sequence b, query head h), its states at row * num_splits.
    The loads skip L1 (.cg): other SMs wrote these states during this launch."""
    dims = tl.arange(0, D)
    offs_s = tl.arange(0, BLOCK_S)
    m_run = tl.max(tl.full([BLOCK_S], float("-inf"), tl.float32), axis=0)   # the empty state
    l_run = tl.sum(tl.zeros([BLOCK_S], tl.float32), axis=0)
    acc_run = tl.zeros([D], tl.float32)
    for s0 in range(0, num_splits, BLOCK_S):
        splits = s0 + offs_s
        ok = splits < num_splits
        m = tl.load(MidM + row * num_splits + splits, mask=ok, other=float("-inf"),
                    cache_modifier=".cg")
        l = tl.load(MidL + row * num_splits + splits, mask=ok, other=0.0, cache_modifier=".cg")
        acc = tl.load(MidAcc + (row * num_splits + splits)[:, None] * D + dims[None, :],
                      mask=ok[:, None], other=0.0, cache_modifier=".cg")
        m_new = tl.maximum(m_run, tl.max(m, axis=0))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)           # never -inf - (-inf)
        alpha = tl.exp(m_run - shift)
        w = tl.exp(m - shift)
        l_run = l_run * alpha + tl.sum(l * w, axis=0)
        acc_run = acc_run * alpha + tl.sum(acc * w[:, None], axis=0)
        m_run = m_new
    o = tl.where(l_run > 0, acc_run / tl.where(l_run > 0, l_run, 1.0), 0.0)
    tl.store(O + b * stride_ob + h * stride_oh + dims, o.to(O.dtype.element_ty))


@triton.jit
def _decode_one_launch(Q, K, V, SeqLens, MidM, MidL, MidAcc, O, Tickets,
                       stride_qb, stride_qh, stride_kb, stride_kh, stride_kn,
                       stride_vb, stride_vh, stride_vn, stride_ob, stride_oh,
                       num_splits, split_size, scale,
                       GROUP: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr,
                       D: tl.constexpr, BLOCK_S: tl.constexpr):
    """Split, then merge, in one launch of grid (num_splits, Hkv, B)."""
    # 1. this program's split, exactly as the split kernel computes and stores it
    _decode_split(Q, K, V, SeqLens, MidM, MidL, MidAcc, stride_qb, stride_qh,
                  stride_kb, stride_kh, stride_kn, stride_vb, stride_vh, stride_vn,
                  num_splits, split_size, scale, GROUP, BLOCK_H, BLOCK_N, D)
    # 2. take a ticket for (sequence, KV head). The barrier puts every thread's stores before
    #    the ticket; the atomic releases them to the GPU and acquires the other programs' stores
    #    (the pattern of CUTLASS's semaphore: __syncthreads, then one thread's release).
    pid_kv = tl.program_id(1)
    pid_b = tl.program_id(2)
    Hkv = tl.num_programs(1)
    tl.debug_barrier()
    ticket = tl.atomic_add(Tickets + pid_b * Hkv + pid_kv, 1, sem="acq_rel", scope="gpu")
    # 3. the last of the num_splits programs merges its GROUP query heads; the others are done
    if ticket == num_splits - 1:
        for g in range(GROUP):
            h = pid_kv * GROUP + g
            _merge_splits(MidM, MidL, MidAcc, O, pid_b * Hkv * GROUP + h, pid_b, h,
                          stride_ob, stride_oh, num_splits, BLOCK_S, D)


@functools.lru_cache(maxsize=None)
def _settings(D, elem_bytes, device):
    import torch

    return fd.launch_config(D, elem_bytes, torch.device(device))


def decode_one_launch(q, k_cache, v_cache, seq_lens, num_splits=None):
    """flash_decode's answer from one launch: one scratch tensor for every split's (m, l, acc),
    one zeroed ticket per (sequence, KV head), made here on every call."""
    import torch

    B, Hq, D = q.shape
    Hkv, L_max = k_cache.shape[1], k_cache.shape[2]
    BLOCK_N, num_warps, num_stages = _settings(D, q.element_size(), str(q.device))
    if num_splits is None:
        num_splits = fd.pick_num_splits(B, Hkv, L_max, BLOCK_N, q.device)
    split_size = triton.cdiv(triton.cdiv(max(L_max, 1), num_splits), BLOCK_N) * BLOCK_N
    n = B * Hq * num_splits
    scratch = torch.empty(n * (D + 2), dtype=torch.float32, device=q.device)   # m, l, acc
    tickets = torch.zeros(B * Hkv, dtype=torch.int32, device=q.device)
    o = torch.empty_like(q)
    group = Hq // Hkv
    _decode_one_launch[(num_splits, Hkv, B)](
        q, k_cache, v_cache, seq_lens, scratch, scratch[n:], scratch[2 * n:], o, tickets,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), o.stride(0), o.stride(1),
        num_splits, split_size, 1.0 / math.sqrt(D),
        GROUP=group, BLOCK_H=max(16, triton.next_power_of_2(group)), BLOCK_N=BLOCK_N, D=D,
        BLOCK_S=min(32, triton.next_power_of_2(num_splits)),
        num_warps=num_warps, num_stages=num_stages)
    return o


# ------------------------------------------------------------------------------ checks


CHECKS = [  # B, Hq, Hkv, L_max, D, seq_lens (None: random), num_splits
    (2, 8, 2, 80, 64, [80, 5], 4),                 # GQA groups of 4; splits with no keys
    (1, 6, 2, 50, 64, [0], 2),                     # a sequence of length 0: o = 0
    (3, 4, 1, 64, 128, [1, 64, 17], None),         # MQA, a length-1 sequence
]


def check(device) -> None:
    """The one-launch kernel against a float64 reference on awkward cases (three calls each: a
    ticket left over from a call before would show)."""
    import torch

    torch.manual_seed(0)
    cases = CHECKS + ([(16, 32, 8, 4097, 128, None, None)] if device == "cuda" else [])
    for B, Hq, Hkv, L, D, lens, splits in cases:
        q = torch.randn(B, Hq, D, device=device).half()
        k, v = (torch.randn(B, Hkv, L, D, device=device).half() for _ in range(2))
        lens = (torch.tensor(lens, dtype=torch.int32) if lens is not None
                else torch.randint(1, L + 1, (B,), dtype=torch.int32)).to(device)
        ref = fd.decode_reference(q.double(), k.double(), v.double(), lens)
        for _ in range(3):
            err = (decode_one_launch(q, k, v, lens, num_splits=splits).double() - ref).abs().max()
            assert err < 5e-3, f"one launch, B={B} Hq={Hq} Hkv={Hkv} L={L}: max abs error {err:.1e}"
        print(f"  ok  one launch B={B} Hq={Hq} Hkv={Hkv} L_max={L} D={D}: err {err:.1e}", flush=True)


# ------------------------------------------------------------------------------ timing


def timings(fn, flush) -> tuple[float, float, float]:
    """(do_bench ms, read-flush ms, back-to-back loop ms) of fn, medians where there are several."""
    import torch

    ms = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
    n = 100
    start = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        flush.sum()                    # reads 256 MB: L2 left full of clean lines
        start[i].record()
        fn()
        end[i].record()
    torch.cuda.synchronize()
    read = sorted(a.elapsed_time(b) for a, b in zip(start, end))[n // 2]
    t0 = time.perf_counter()
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    return ms, read, (time.perf_counter() - t0) / 200 * 1e3


def graphed(fn):
    """fn's launches captured once in a CUDA graph; returns its replay."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def split_only(q, k, v, lens, num_splits):
    """_decode_split alone at num_splits, its buffers made once."""
    import torch

    B, Hq, D = q.shape
    Hkv, L = k.shape[1], k.shape[2]
    BLOCK_N, num_warps, num_stages = _settings(D, q.element_size(), str(q.device))
    split_size = triton.cdiv(triton.cdiv(L, num_splits), BLOCK_N) * BLOCK_N
    mid_m = torch.empty((B, Hq, num_splits), dtype=torch.float32, device=q.device)
    mid_l = torch.empty_like(mid_m)
    mid_acc = torch.empty((B, Hq, num_splits, D), dtype=torch.float32, device=q.device)
    group = Hq // Hkv

    def launch():
        _decode_split[(num_splits, Hkv, B)](
            q, k, v, lens, mid_m, mid_l, mid_acc, q.stride(0), q.stride(1),
            k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
            num_splits, split_size, 1.0 / math.sqrt(D),
            GROUP=group, BLOCK_H=max(16, triton.next_power_of_2(group)), BLOCK_N=BLOCK_N, D=D,
            num_warps=num_warps, num_stages=num_stages)
    return launch


def host_us(fn, n=2000) -> float:
    """Wall time per call of fn with the GPU almost idle: the wrapper's Python and launches."""
    import torch

    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "reports/tune_decode"))
    ap.add_argument("--cases", nargs="+", default=["8:8192", "8:16384", "32:8192", "8:32768"],
                    help="Hkv:L pairs")
    ap.add_argument("--check", action="store_true", help="only check the one-launch kernel")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    device = "cuda" if torch.cuda.is_available() else "cpu"
    check(device)
    if args.check:
        return
    from grader.judge.machine import ceilings

    copy = ceilings.copy_bandwidth_gbs(torch)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}: "
          f"copy bandwidth {copy:.0f} GB/s", flush=True)
    B, Hq, D = 8, 32, 128
    q = torch.randn(B, Hq, D, device="cuda").half()
    k, v = (torch.randn(B, 8, 256, D, device="cuda").half() for _ in range(2))
    lens = torch.full((B,), 256, dtype=torch.int32, device="cuda")
    print(f"host time per call (Hkv = 8, L = 256): two launches "
          f"{host_us(lambda: fd.flash_decode(q, k, v, lens)):.1f} us, one launch "
          f"{host_us(lambda: decode_one_launch(q, k, v, lens)):.1f} us", flush=True)
    flush = torch.ones(1 << 26, dtype=torch.int32, device="cuda")
    rows = ["| case | variant | do_bench, of copy | read flush, of copy | loop, of copy |",
            "|---|---|---|---|---|"]
    raw = []
    for case in args.cases:
        Hkv, L = (int(x) for x in case.split(":"))
        q = torch.randn(B, Hq, D, device="cuda").half()
        k, v = (torch.randn(B, Hkv, L, D, device="cuda").half() for _ in range(2))
        lens = torch.full((B,), L, dtype=torch.int32, device="cuda")
        ref = fd.decode_reference(q[:1].double(), k[:1].double(), v[:1].double(), lens[:1])[0]
        nbytes = 2 * B * Hkv * L * D * 2
        splits = fd.pick_num_splits(B, Hkv, L, _settings(D, 2, "cuda")[0], q.device)
        variants = {
            f"two launches ({splits} splits)": lambda: fd.flash_decode(q, k, v, lens),
            "two launches, graphed": graphed(lambda: fd.flash_decode(q, k, v, lens)),
            f"split only ({splits} splits)": split_only(q, k, v, lens, splits),
            f"one launch ({splits} splits)": lambda: decode_one_launch(q, k, v, lens),
        }
        for n in (8, 16, 33, 66):
            variants[f"two launches, splits={n}"] = functools.partial(
                fd.flash_decode, q, k, v, lens, num_splits=n)
            variants[f"one launch, splits={n}"] = functools.partial(
                decode_one_launch, q, k, v, lens, num_splits=n)
        gqa = Hkv != Hq
        for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
            def sdpa(backend=backend):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q[:, :, None], k, v, enable_gqa=gqa)[:, :, 0]
            variants[f"SDPA {backend.name.lower()}"] = sdpa
        for name, fn in variants.items():
            try:
                if "graphed" not in name and "split only" not in name:
                    err = (fn()[0].double() - ref).abs().max().item()
                    assert err < 1e-2, f"{name}: max abs error {err:.1e}: not timing a wrong answer"
                ms = timings(fn, flush)
            except RuntimeError as e:    # an SDPA backend that does not take this case
                print(f"  {case} {name}: {str(e)[:100]}", flush=True)
                continue
            fr = [nbytes / t / 1e6 / copy for t in ms]
            raw.append({"Hkv": Hkv, "L": L, "variant": name, "ms": ms, "of_copy": fr})
            rows.append(f"| Hkv={Hkv} L={L} | {name} | " + " | ".join(f"{x:.2f}" for x in fr) + " |")
            print(rows[-1], flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "decode.md").write_text(f"{torch.cuda.get_device_name()}; copy bandwidth {copy:.0f} "
                                   f"GB/s\n\n" + "\n".join(rows) + "\n")
    (out / "decode.json").write_text(json.dumps({"device": torch.cuda.get_device_name(),
                                                 "copy_gbs": copy, "rows": raw}, indent=1))


if __name__ == "__main__":
    main()
