"""Bandwidth table and tile sweep for solutions/softmax_long.py on a CUDA GPU: GB/s of the
solution's defaults beside torch.softmax and a copy, by row length, and which (BLOCK,
num_warps) would be faster at each width (--sweep).

    python -m tools.tune_softmax_long [--out DIR] [--sweep]

rows x cols = 2^26 at every width (128 MiB read and 128 MiB written in 16-bit types), float16
and bfloat16. GB/s = 2 * rows * cols * 2 bytes / time: one read and one write of the matrix,
for the copy (out.copy_(x)) too; every configuration's output is checked against float32
torch.softmax before it is timed (triton.testing.do_bench: warm-up, L2 flush, mean). Writes the
Markdown table and the raw numbers (JSON) under DIR, and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from tools import solution

COLS = (256, 1024, 4096, 16384, 65536, 262144)
ELEMENTS = 1 << 26


def variants(cols: int) -> list[dict]:
    """Other (BLOCK, num_warps) to try at this width: one tile with other warp counts while a
    row fits in 64K columns, and the online kernel's blocks past 8K."""
    out = [dict(num_warps=w) for w in (4, 8, 16, 32)] if cols <= 32768 else []
    if cols >= 16384:
        out += [dict(BLOCK=b, num_warps=w) for b in (4096, 8192, 16384) for w in (8, 16) if b < cols]
    if cols == 65536:
        out += [dict(BLOCK=65536, num_warps=32)]
    return out


def gbs(ms: float, x) -> float:
    return 2 * x.numel() * x.element_size() / ms / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "reports/tune"))
    ap.add_argument("--sweep", action="store_true",
                    help="also time other (BLOCK, num_warps) at each width (a few minutes)")
    args = ap.parse_args()
    import torch
    import triton

    sl = solution.load("softmax_long")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    raw, lines = [], ["| dtype | rows x cols | copy GB/s | torch.softmax GB/s | softmax GB/s | "
                      "softmax / copy | softmax / torch | best other (BLOCK, warps): GB/s |",
                      "|---|---|---|---|---|---|---|---|"]
    for dtype in (torch.float16, torch.bfloat16):
        for cols in COLS:
            rows = ELEMENTS // cols
            torch.manual_seed(cols)
            x = torch.randn(rows, cols, device="cuda", dtype=dtype)
            out = torch.empty_like(x)
            ref = torch.softmax(x[:64].float(), dim=-1)
            rate = {"copy": gbs(triton.testing.do_bench(lambda: out.copy_(x)), x),
                    "torch": gbs(triton.testing.do_bench(lambda: torch.softmax(x, dim=-1)), x)}
            for name, kw in [("default", {})] + ([(str(v), v) for v in variants(cols)]
                                                 if args.sweep else []):
                err = float((sl.softmax(x[:64], **kw).float() - ref).abs().max())
                if not err <= 1e-2:
                    rate[name] = f"wrong (max abs error {err:.1e})"
                    continue
                rate[name] = gbs(triton.testing.do_bench(lambda: sl.softmax(x, **kw)), x)
            raw.append(dict(dtype=str(dtype), rows=rows, cols=cols, **rate))
            mine = rate["default"]
            others = {k: v for k, v in rate.items() if k not in ("copy", "torch", "default")
                      and isinstance(v, float)}
            best = max(others, key=others.get) if others else ""
            ok = isinstance(mine, float)    # else the text of a wrong answer
            cells = [f"{mine:.0f}", f"{mine / rate['copy']:.2f}",
                     f"{mine / rate['torch']:.2f}"] if ok else [mine, "", ""]
            lines.append(f"| {str(dtype)[6:]} | {rows} x {cols} | {rate['copy']:.0f} | "
                         f"{rate['torch']:.0f} | {' | '.join(cells)} | "
                         + (f"{best}: {others[best]:.0f} |" if best else "|"))
            print(lines[-1], flush=True)
            x = out = None
            torch.cuda.empty_cache()
    text = "\n".join(["GB/s = 2 x rows x cols x 2 bytes / time (one read, one write); "
                      "rows x cols = 2^26", ""] + lines) + "\n"
    (out_dir / "softmax_long_tune.md").write_text(text)
    (out_dir / "softmax_long_tune.json").write_text(json.dumps(raw, indent=1))
    print(text)


if __name__ == "__main__":
    main()
