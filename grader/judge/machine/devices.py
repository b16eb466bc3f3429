"""Device profiles, as data: what the grader and `make bench` may assume about each GPU family.

One profile per family, picked by compute capability (`profile_for`). A profile says how much
shared memory one block may use, the spec-sheet bandwidth, whether the GPU shares its memory
with the CPU, and which flash_fwd tile shapes are worth trying there; the perf thresholds are
the exercises' (grader.judge.perf.verdicts), by profile key where a device needs its own. Nothing
here assumes Hopper: an unknown device gets conservative defaults, and the shared memory the
device itself reports always wins over the table.

The figures are leads, not measurements we own: they come from vendor spec sheets, published
benchmarks, the lesson, and one reference run of this lab on an H200 (docs/SPARK.md). The perf
checks compare against ceilings measured in the same run (grader/judge/machine/ceilings.py), never against
these spec numbers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

KB = 1024
GB = 1e9

# flash_fwd tile shapes worth trying, (BLOCK_M, BLOCK_N, num_warps, num_stages), smallest first.
# Each profile keeps those whose shared memory estimate fits its limit (see flash_smem_bytes).
FLASH_CANDIDATES = (
    (32, 64, 4, 2),
    (64, 32, 4, 3),
    (64, 64, 4, 2),
    (64, 64, 4, 3),
    (128, 64, 8, 2),
    (64, 128, 4, 2),
    (64, 128, 4, 3),      # the best shape on an H200 (reference run)
    (128, 64, 4, 3),      # the worst of the big ones on an H200 (~195 TFLOP/s)
    (128, 64, 8, 3),
    (128, 128, 8, 2),
    (128, 128, 8, 3),
)
# Small enough for the 48 KB every CUDA GPU gives a block; tried only when nothing above fits.
FLASH_FALLBACK = ((32, 32, 4, 2), (64, 32, 4, 2))


def flash_smem_bytes(block_m: int, block_n: int, num_stages: int, head_dim: int = 128,
                     elem_bytes: int = 2, wgmma: bool = False) -> int:
    """Estimated shared memory of the lesson's flash kernel for one tile shape, in bytes.

    Triton pipelines the K and V loads: it keeps several (BLOCK_N, D) tiles of each in flight.

        Hopper (wgmma):  BLOCK_M*D (Q)                 + num_stages         * 2*BLOCK_N*D
        others (mma):    BLOCK_M*D (Q) + BLOCK_M*BLOCK_N (P) + max(num_stages-1, 1) * 2*BLOCK_N*D
                                                              (all times elem_bytes)

    Calibrated on Triton 3.9, compiling solutions/flash_triton.py for sm_80, sm_90 and sm_121
    without a GPU (docs/SPARK.md has the table): exact for most shapes, a few KB to 30% high for
    the others, never low. Other Triton versions differ; Break It 5 is the real test.
    """
    kv_tile = 2 * block_n * head_dim                     # one K tile and one V tile, elements
    if wgmma:
        elems = block_m * head_dim + num_stages * kv_tile
    else:
        elems = block_m * head_dim + block_m * block_n + max(num_stages - 1, 1) * kv_tile
    return elems * elem_bytes


@dataclass(frozen=True)
class Profile:
    name: str
    capabilities: tuple            # (major, minor) pairs this profile matches
    smem_per_block: int            # bytes one block may opt in to (shared_memory_per_block_optin)
    bandwidth_gbs: float | None    # spec-sheet main-memory bandwidth, GB/s; None: unknown
    unified_memory: bool           # GPU memory is the CPU's memory (an oversized allocation can
                                   # stall the whole machine, not just raise OutOfMemoryError)
    wgmma: bool | None = False     # Hopper's warpgroup MMA (Triton keeps num_stages K/V buffers);
                                   # None: not known, take the larger estimate
    flash_configs: tuple = ()      # FLASH_CANDIDATES that fit smem_per_block (filled in below)
    # naive attention runs only if its estimated bytes fit in this fraction of free memory, minus
    # the reserve (grader/judge/machine/ceilings.py: fits).
    memory_fraction: float = 0.8
    memory_reserve_bytes: int = 1 << 30
    notes: str = ""
    key: str = ""                  # the short name a grading target is asked for by (by_key)

    @property
    def arch(self) -> int:
        """The compute capability as Triton's GPUTarget writes it (12.1 -> 121); 0 if none."""
        return self.capabilities[0][0] * 10 + self.capabilities[0][1] if self.capabilities else 0

    def with_smem(self, smem_per_block: int) -> "Profile":
        """This profile with the shared memory limit the device reports, configs re-filtered."""
        return _fill(dataclasses.replace(self, smem_per_block=int(smem_per_block)))


def _fill(p: Profile) -> Profile:
    models = (True, False) if p.wgmma is None else (p.wgmma,)

    def fit(configs):
        return tuple(c for c in configs
                     if max(flash_smem_bytes(c[0], c[1], c[3], wgmma=w) for w in models)
                     <= p.smem_per_block)

    return dataclasses.replace(p, flash_configs=fit(FLASH_CANDIDATES) or fit(FLASH_FALLBACK))


GB10 = _fill(Profile(
    name="GB10 (DGX Spark, sm_121)",
    key="gb10",
    capabilities=((12, 1),),
    smem_per_block=99 * KB,         # 101376 bytes; 100 KB per SM
    bandwidth_gbs=273.0,            # LPDDR5X, shared with the CPU
    unified_memory=True,
    memory_fraction=0.5,            # unified: a page cache or the CPU side can eat "free" memory
    memory_reserve_bytes=8 << 30,
    notes="Leads: 48 SMs?, 24 MB L2, 128 GB LPDDR5X unified, no wgmma/TMEM; "
          "Hopper-sized tiles exceed 99 KB (Break It 5). Triton <= 3.5 needs "
          "TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas (docs/SPARK.md).",
))

HOPPER = _fill(Profile(
    name="Hopper (H100/H200, sm_90)",
    key="hopper",
    capabilities=((9, 0),),
    smem_per_block=227 * KB,        # 232448 bytes
    bandwidth_gbs=3350.0,           # H100 SXM HBM3; H200 HBM3e 4800 (see _BANDWIDTH_BY_NAME)
    unified_memory=False,
    wgmma=True,
    notes="H200 reference run: copy 4.27 TB/s, fp16 matmul 663 TFLOP/s, cuDNN SDPA "
          "~590 TFLOP/s, the lesson's kernel at 64x128 tiles ~350 TFLOP/s.",
))

AMPERE_DC = _fill(Profile(
    name="Ampere data centre (A100, sm_80)",
    key="a100",
    capabilities=((8, 0),),
    smem_per_block=163 * KB,        # 166912 bytes
    bandwidth_gbs=1555.0,           # A100 40 GB HBM2; 80 GB HBM2e 2039
    unified_memory=False,
))

AMPERE = _fill(Profile(
    name="Ampere / Ada (sm_86, sm_89)",
    key="ampere",
    capabilities=((8, 6), (8, 9)),
    smem_per_block=99 * KB,
    bandwidth_gbs=None,             # 448 GB/s (RTX 3070) to 1008 (RTX 4090): too wide to guess
    unified_memory=False,
))

UNKNOWN = _fill(Profile(
    name="unknown GPU",
    key="unknown",                  # an exercise's device_bands may name it
    capabilities=(),
    smem_per_block=48 * KB,         # every CUDA GPU gives a block 48 KB without opting in
    bandwidth_gbs=None,
    unified_memory=False,
    wgmma=None,
    memory_fraction=0.5,
    memory_reserve_bytes=2 << 30,
    notes="Not in the table: conservative defaults. The shared memory the device reports "
          "replaces the 48 KB guess.",
))

PROFILES = (GB10, HOPPER, AMPERE_DC, AMPERE)

# grading targets by short name (GRADER_TARGET, --target, make grade-gpu TARGET=...)
TARGET_NAMES = {"gb10": GB10, "spark": GB10, "hopper": HOPPER, "h100": HOPPER, "h200": HOPPER,
                "a100": AMPERE_DC, "ampere": AMPERE}


def by_key(name: str) -> Profile | None:
    """The profile a target name stands for ("gb10", "spark", "h200", ...); None if unknown."""
    return TARGET_NAMES.get(str(name or "").strip().lower())

# Spec bandwidth of a few named parts within a family, GB/s (first match wins).
_BANDWIDTH_BY_NAME = (("H200", 4800.0), ("H100 PCIe", 2000.0), ("H100", 3350.0),
                      ("A100-SXM4-80GB", 2039.0), ("A100 80GB", 2039.0))


def profile_for(capability, name: str = "", smem_per_block: int | None = None) -> Profile:
    """The profile for a device.

    Args:
        capability: (major, minor), as torch.cuda.get_device_capability() returns it.
        name: the device name (torch.cuda.get_device_name()); refines the spec bandwidth and
            recognises a GB10 by name if its capability is not (12, 1).
        smem_per_block: the device's shared_memory_per_block_optin, if known; it replaces the
            table's figure (the device knows better) and the tile shapes are re-filtered.
    Returns:
        A Profile; UNKNOWN for anything not in the table.
    """
    cap = tuple(int(x) for x in capability)
    profile = next((p for p in PROFILES if cap in p.capabilities), None)
    if profile is None and "GB10" in (name or ""):
        profile = GB10
    if profile is None:
        profile = UNKNOWN
    for part, gbs in _BANDWIDTH_BY_NAME:
        if part in (name or "") and profile in (HOPPER, AMPERE_DC):
            profile = dataclasses.replace(profile, bandwidth_gbs=gbs)
            break
    if smem_per_block and int(smem_per_block) != profile.smem_per_block:
        profile = profile.with_smem(smem_per_block)
    return profile


def describe(torch, device: int = 0) -> dict:
    """What the device says about itself, plus the profile the grader picked for it.

    Args:
        torch: the torch module (passed in so nothing here imports it at module load).
        device: CUDA device index.
    Returns:
        dict(name, capability, sms, total_memory_gb, smem_per_block, smem_per_sm, l2_bytes,
        integrated, profile, ...); {"cuda": False, ...} without CUDA.
    """
    if not torch.cuda.is_available():
        return {"cuda": False, "name": "CPU only", "profile": None}
    p = torch.cuda.get_device_properties(device)
    smem = getattr(p, "shared_memory_per_block_optin", None)
    profile = profile_for((p.major, p.minor), p.name, smem)
    return {
        "cuda": True,
        "name": p.name,
        "capability": [p.major, p.minor],
        "sms": p.multi_processor_count,
        "total_memory_gb": p.total_memory / GB,
        "smem_per_block": smem,
        "smem_per_sm": getattr(p, "shared_memory_per_multiprocessor", None),
        "l2_bytes": getattr(p, "L2_cache_size", None),
        "integrated": bool(getattr(p, "is_integrated", 0)),
        "torch": torch.__version__,
        "cuda_version": torch.version.cuda,
        "profile": profile.name,
        "unified_memory": profile.unified_memory or bool(getattr(p, "is_integrated", 0)),
        "bandwidth_spec_gbs": profile.bandwidth_gbs,
        "flash_configs": [list(c) for c in profile.flash_configs],
    }
