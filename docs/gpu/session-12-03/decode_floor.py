# Scratch: is flash_decode's per-call floor at small caches CPU launch cost? do_bench (launches
# from Python each call) against do_bench_cudagraph (one graph replay, no CPU per call).
import sys
import torch
import triton
import torch.nn.functional as F
sys.path.insert(0, ".")
from tools import solution  # noqa: E402

fd = solution.load("flash_decode")
B, Hq, D = 8, 32, 128
for Hkv in (8, 32):
    for L in (4096, 8192, 16384):
        q = torch.randn(B, Hq, D, device="cuda", dtype=torch.float16)
        k, v = (torch.randn(B, Hkv, L, D, device="cuda", dtype=torch.float16) for _ in range(2))
        lens = torch.full((B,), L, dtype=torch.int32, device="cuda")
        nbytes = 2 * B * Hkv * L * D * 2
        f = lambda: fd.flash_decode(q, k, v, lens)  # noqa: E731
        g = lambda: F.scaled_dot_product_attention(q[:, :, None], k, v, enable_gqa=Hkv != Hq)  # noqa: E731
        f(); g()
        row = [f"Hkv={Hkv} L={L} ideal {nbytes / 4221e9 * 1e6:.0f} us"]
        for name, fn in (("ours", f), ("sdpa", g)):
            a = triton.testing.do_bench(fn, return_mode="median") * 1e3
            try:
                b = triton.testing.do_bench_cudagraph(fn, return_mode="median") * 1e3
            except Exception as e:  # noqa: BLE001
                b = float("nan"); print(name, "graph failed", type(e).__name__, str(e)[:100])
            row.append(f"{name}: {a:.0f} us launched, {b:.0f} us in a graph")
        import time
        t = time.perf_counter()
        for _ in range(200):
            fd.flash_decode(q, k, v, lens)
        cpu = (time.perf_counter() - t) / 200 * 1e6
        torch.cuda.synchronize()
        row.append(f"ours CPU per call (queued, unsynced) {cpu:.0f} us")
        print(" | ".join(row), flush=True)
