"""(H200 record, docs/gpu/timed-provenance/) Per-call cost of recording timed calls on the GPU: variants of grader.worker.probes._run_many."""
import cProfile, contextlib, io, pstats, sys, time
sys.path.insert(0, "solutions"); sys.path.insert(0, ".")
import torch
from grader.worker import probes, tracing
from grader.wire import checksum
import softmax_long as sl
import flash_decode as fd

def loop(fn, args, variant, n=300):
    target = args[0]
    weights = None
    torch.cuda.synchronize()
    t = time.perf_counter()
    for i in range(n):
        checksum.refill(target, i + 1, 1.0)
        if variant == "plain":
            out = fn(*args)
        elif variant == "recorded":
            out = probes._recorded_call(fn, args, {})
        elif variant == "trace_only":
            with tracing.trace({}, None, None, None, describe=False):
                out = fn(*args)
        elif variant == "launch_patch_only":
            with tracing._count_triton_launches([0], [], None, None, None, [0]):
                out = fn(*args)
        elif variant == "mode_only":
            class M(tracing.dispatch_mode()):
                def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                    return func(*args, **(kwargs or {}))
            with M():
                out = fn(*args)
        if weights is None:
            weights = checksum.checksum_weights(out, 7)
        checksum.checksum(out, weights)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e3

x = torch.randn(2 ** 26 // 256, 256, device="cuda", dtype=torch.float16)
B, Hq, Hkv, L, D = 8, 32, 8, 32768, 128
q = torch.randn(B, Hq, D, device="cuda", dtype=torch.float16)
k = torch.randn(B, Hkv, L, D, device="cuda", dtype=torch.float16)
v = torch.randn(B, Hkv, L, D, device="cuda", dtype=torch.float16)
lens = torch.full((B,), L, device="cuda", dtype=torch.int32)
cases = {"softmax_long 256 cols": (sl.softmax, [x]), "flash_decode Hkv=8 L=32K": (fd.flash_decode, [q, k, v, lens])}
for name, (fn, args) in cases.items():
    probes._built_tensors[:] = [(a, a.reshape(-1)[:0]) for a in args]
    for variant in ("plain", "recorded", "trace_only", "launch_patch_only", "mode_only", "plain"):
        loop(fn, args, variant, 20)
        print(f"{name:28s} {variant:18s} {loop(fn, args, variant):.4f} ms/call", flush=True)
    pr = cProfile.Profile(); pr.enable(); loop(fn, args, "recorded", 100); pr.disable()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18); print(s.getvalue()[-4000:])
