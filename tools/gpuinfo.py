"""make gpuinfo (python -m tools.gpuinfo): the lesson's gpuinfo.py, then the memory ladder.

"Sketch the layers of memory on a graphics chip, from the tiny fast storage beside the math
units down to the big slow main memory, with rough sizes and speeds, and say which layer
attention is stuck waiting on." On a CUDA GPU, each rung's size comes from the device
(torch.cuda.get_device_properties) and its bandwidth is measured here or derived:

    registers       regs_per_multiprocessor x 4 bytes, per SM and in all
    shared memory   per SM and per block (opt-in); bandwidth derived as the lesson does it:
                    SMs x 128 bytes per clock x clock
    L2              L2_cache_size; copy bandwidth of buffers that fit in it (measured: a lower
                    bound, since each copy is short enough that its launch counts)
    HBM             total memory; copy bandwidth of 1 GiB buffers (measured: 2 x bytes / time),
                    and the spec sheet's figure where the profile knows it

then the ridge point (fp16 matmul TFLOP/s measured here, over the HBM copy bandwidth) and the
rung naive attention waits on: its intensity (grader/exercises/io_model/reference.py, d = 128,
fp16) against the ridge. Without a GPU it says so in one line and draws the lesson's A100 and
GB10 figures instead. --out DIR also writes ladder.md and ladder.json there.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KB, MB, GB = 1024, 1 << 20, 1e9
BYTES_PER_CLOCK = 128      # shared-memory bytes one SM delivers per clock (the lesson's figure)
D = 128                    # the head size naive attention is placed with (the lesson's example)

# The lesson's figures ("Two kinds of memory on one chip", the roofline), for a machine without
# a GPU. Where the lesson gives a range ("a few hundred KB per SM", "100 to 228 KB", "tens of
# MB"), the part's spec-sheet value, or the lab's GB10 profile (grader/judge/machine/devices.py).
LESSON = {
    "A100": dict(name="NVIDIA A100 (the FlashAttention paper's GPU; the lesson's figures)",
                 sms=108, clock_hz=1.41e9, regs_per_sm=256 * KB, smem_per_sm=164 * KB,
                 smem_per_block=163 * KB, l2_bytes=40 * MB, hbm_bytes=40e9, hbm_gbs=1500.0,
                 hbm_what="HBM2, spec", peak_tflops=312.0,
                 ridge_said="around 150 to 200"),
    "GB10": dict(name="NVIDIA GB10, DGX Spark (the lesson's figures and the lab's profile)",
                 sms=None, clock_hz=None, sram_tbs_said="on the order of 10 TB/s or more",
                 regs_per_sm=256 * KB, smem_per_sm=100 * KB, smem_per_block=99 * KB,
                 l2_bytes=24 * MB, hbm_bytes=128e9, hbm_gbs=273.0,
                 hbm_what="LPDDR5x shared with the CPU, spec", peak_tflops=125.0,
                 ridge_said="around 460 on spec-sheet numbers"),
}


def naive_intensity(d: int = D) -> float:
    """FLOPs per byte of naive attention at large N, fp16: the io_model exercise's formula."""
    from grader import registry

    return registry.exercise_module("io_model", "reference").naive_intensity(1 << 16, d, 2)


def sm_clock_hz(props) -> float | None:
    """The SM clock: the device's clock_rate (kHz) where torch has it, else NVML's max SM clock,
    else nvidia-smi's; None when none says."""
    khz = getattr(props, "clock_rate", None)
    if khz:
        return float(khz) * 1e3
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return float(pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)) * 1e6
    except Exception:  # noqa: BLE001 - no NVML here: try nvidia-smi
        pass
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=20).stdout.split()
            return float(out[0]) * 1e6 if out else None
        except (OSError, ValueError, subprocess.SubprocessError):
            return None
    return None


def measure(torch) -> dict:
    """The ladder of this machine's GPU 0: sizes from the device, bandwidths measured here."""
    from grader.judge.machine import ceilings, devices

    info = devices.describe(torch)
    p = torch.cuda.get_device_properties(0)
    profile = devices.profile_for((p.major, p.minor), p.name, info.get("smem_per_block"))
    clock = sm_clock_hz(p)
    l2 = info.get("l2_bytes") or 0
    hbm = ceilings.copy_bandwidth_gbs(torch)
    l2_copy = ceilings.copy_bandwidth_gbs(torch, nbytes=max(l2 // 4, 1 << 20)) if l2 else None
    tflops = ceilings.matmul_tflops(torch)
    regs = getattr(p, "regs_per_multiprocessor", None)
    return dict(name=f"{p.name} (measured here)", sms=p.multi_processor_count, clock_hz=clock,
                regs_per_sm=4 * regs if regs else None, smem_per_sm=info.get("smem_per_sm"),
                smem_per_block=info.get("smem_per_block"), l2_bytes=l2 or None,
                l2_copy_gbs=l2_copy, hbm_bytes=p.total_memory, hbm_gbs=hbm,
                hbm_what="copy of 1 GiB buffers, measured", hbm_spec_gbs=profile.bandwidth_gbs,
                peak_tflops=tflops, peak_what="fp16 matmul, measured",
                capability=[p.major, p.minor], profile=profile.name)


def rungs(chip: dict) -> list[dict]:
    """The ladder from the top: name, size text, bandwidth in GB/s (or None) and its text."""
    sms, clock = chip.get("sms"), chip.get("clock_hz")
    per_sm = lambda b: f"{b / KB:.0f} KB per SM" if b else "?"   # noqa: E731
    regs = chip.get("regs_per_sm")
    sram = sms * BYTES_PER_CLOCK * clock / 1e9 if sms and clock else None
    sram_text = (f"{sram / 1e3:.1f} TB/s = {sms} SMs x {BYTES_PER_CLOCK} B x "
                 f"{clock / 1e9:.2f} GHz (derived)" if sram else
                 f"{chip.get('sram_tbs_said', '?')} (SMs x {BYTES_PER_CLOCK} B x clock: check yours)")
    l2 = chip.get("l2_bytes")
    l2_bw = chip.get("l2_copy_gbs")
    hbm, spec = chip["hbm_gbs"], chip.get("hbm_spec_gbs")
    return [
        dict(rung="registers", size=per_sm(regs) + (f", {regs * sms / MB:.0f} MB in all"
                                                     if regs and sms else ""),
             gbs=None, bw="what the math units read each clock"),
        dict(rung="shared memory (SRAM)",
             size=f"{per_sm(chip.get('smem_per_sm'))}, "
                  f"{(chip.get('smem_per_block') or 0) / KB:.0f} KB per block",
             gbs=sram or (10e3 if "sram_tbs_said" in chip else None), bw=sram_text),
        dict(rung="L2 (whole chip)", size=f"{l2 / MB:.0f} MB" if l2 else "?", gbs=l2_bw,
             bw=f">= {l2_bw / 1e3:.1f} TB/s (copy within L2, measured)" if l2_bw else
                "managed by the hardware"),
        dict(rung="HBM (main memory)", size=f"{chip['hbm_bytes'] / GB:.0f} GB", gbs=hbm,
             bw=f"{hbm:,.0f} GB/s ({chip['hbm_what']})"
                + (f"; spec {spec:,.0f} GB/s" if spec else "")),
    ]


def verdict(chip: dict) -> tuple[float, float, str]:
    """(ridge FLOPs/byte, naive's intensity, the rung naive attention waits on)."""
    ridge = chip["peak_tflops"] * 1e12 / (chip["hbm_gbs"] * 1e9)
    naive = naive_intensity()
    return ridge, naive, "HBM (main memory)" if naive < ridge else "the math units"


def draw(chip: dict) -> list[str]:
    """The ladder as text: one rung a line, a bar as long as log10 of its bandwidth."""
    ridge, naive, waits = verdict(chip)
    lines = [chip["name"], ""]
    for r in rungs(chip):
        bar = "#" * max(1, round(6 * math.log10(r["gbs"] / 10))) if r["gbs"] else ""
        mark = "   <== naive attention waits here" if r["rung"] == waits else ""
        lines.append(f"  {r['rung']:<22} {r['size']:<32} {r['bw']}")
        if bar or mark:
            lines.append(f"  {'':<22} {bar}{mark}")
    said = f" (the lesson: {chip['ridge_said']})" if chip.get("ridge_said") else ""
    lines += ["", f"  ridge point: {ridge:.0f} FLOPs/byte = {chip['peak_tflops']:.0f} TFLOP/s "
                  f"({chip.get('peak_what', 'fp16 tensor cores, spec')}) / "
                  f"{chip['hbm_gbs']:,.0f} GB/s{said}",
              f"  naive attention, d = {D}, fp16: {naive:.0f} FLOPs/byte (about d / 2, whatever N "
              f"is): {'left of the ridge, memory-bound: it waits on HBM, moving S and P' if naive < ridge else 'right of the ridge: compute-bound'}",
              ""]
    return lines


def has_gpu():
    """torch with CUDA, or None (no torch, no GPU)."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.gpuinfo", description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="also write ladder.md and ladder.json in this folder")
    ap.add_argument("--no-cuda", action="store_true", help="as on a machine without a GPU")
    args = ap.parse_args(argv)
    torch = None if args.no_cuda else has_gpu()
    if torch is None:
        print("gpuinfo: no CUDA GPU on this machine: the lesson's A100 and GB10 figures instead "
              "of a measured ladder.", flush=True)
        chips = list(LESSON.values())
    else:
        import runpy

        runpy.run_path(str(ROOT / "gpuinfo.py"), run_name="__main__")   # the lesson's given code
        print(flush=True)
        chips = [measure(torch)]
    text = [line for chip in chips for line in draw(chip)]
    print("\n".join(text), flush=True)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "ladder.md").write_text("# The memory ladder (make gpuinfo)\n\n```\n"
                                       + "\n".join(text) + "\n```\n")
        (out / "ladder.json").write_text(json.dumps(
            [dict(chip, rungs=rungs(chip), ridge=verdict(chip)[0], naive=verdict(chip)[1],
                  waits=verdict(chip)[2]) for chip in chips], indent=1, default=str))
        print(f"gpuinfo: wrote {out}/ladder.md and ladder.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
