"""A grading target: the GPU the lesson runs on, checked from another one.

`make grade-gpu TARGET=gb10` (or `--target gb10`, or GRADER_TARGET=gb10) grades on whatever GPU
is here and ALSO asks, for every gated call on CUDA, that each Triton kernel the student launched
be compiled for the target too (grader/worker/resources.py, in the worker; `opts["target"]`).
The trusted side collects those records here (`Evidence`) and compares each kernel's shared
memory on the target with the target profile's `smem_per_block` (grader/judge/machine/devices.py). A
kernel over the limit would fail on the target with "out of resources: shared memory" (the
lesson's Break It 5).

This is advice, not points: the records come from the worker, next to student code, which could
forge them. The report lists the kernels that do not fit (`report["target"]["over_limit"]`) and
says that speed was measured here, not on the target; no check's score moves.
"""

from __future__ import annotations

from grader.judge.machine import devices

# archs to try, in order, when the installed ptxas does not know the target's: the same mma path
# and the same shared memory figures (Triton 3.9, docs/SPARK.md); never across to sm_90's wgmma
FALLBACK = {121: (120, 80), 120: (80,), 89: (86, 80), 86: (80,)}
NICKNAMES = {"gb10": "the Spark"}
MAX_KERNELS = 200      # distinct kernels kept for the report
NOTE = ("Each kernel is checked with the tiles, warps and stages it was launched with here; code "
        "that picks them from the device (its shared memory, its capability) may pick others on "
        "the target. The numbers come from the worker's own compile: advice, not points.")


class UnknownTarget(ValueError):
    """A target name that is not in devices.TARGET_NAMES; the message is one line."""


def lookup(name: str | None) -> devices.Profile | None:
    """The target profile for a name; None for no target ("", "none"); UnknownTarget else."""
    if name is None or str(name).strip().lower() in ("", "none", "off"):
        return None
    profile = devices.by_key(name)
    if profile is None or not profile.arch:
        raise UnknownTarget(f"unknown target {str(name)[:40]!r}; choose from "
                            f"{', '.join(sorted(devices.TARGET_NAMES))}")
    return profile


def short(profile: devices.Profile) -> str:
    """"GB10", "Hopper": the profile's name before its parenthesis."""
    return profile.name.split(" (")[0]


def spec(profile: devices.Profile) -> dict:
    """What a gated call sends the worker: opts["target"]."""
    return {"arch": profile.arch, "warp_size": 32, "fallback": list(FALLBACK.get(profile.arch, ()))}


def tile_profile(here: devices.Profile, target: devices.Profile) -> devices.Profile:
    """What the perf layer's tile sweep reads with a target: this device's profile (its
    thresholds, ratios measured here) with the target's tile shapes, under the smaller of the two
    shared memory limits."""
    import dataclasses

    limit = min(target.smem_per_block, here.smem_per_block)
    tiles = target.with_smem(limit).flash_configs
    return dataclasses.replace(here, flash_configs=tiles, smem_per_block=limit)


def header(profile: devices.Profile, measured_on: str) -> str:
    return (f"target {short(profile)} (sm_{profile.arch}): resources checked from compiled "
            f"metadata; speed was measured on {measured_on}, not on the target")


class Evidence:
    """Every kernel record of a run's gated calls, judged against the target's limit."""

    def __init__(self, profile: devices.Profile):
        self.profile = profile
        self.kernels: dict = {}    # key -> entry (see _entry)
        self.calls = 0             # gated calls that sent the target

    def add(self, exercise: str, check_id: str, extras: dict) -> None:
        """Take the records of one gated call (extras["compiled"]); bad data is skipped."""
        self.calls += 1
        records = extras.get("compiled") if isinstance(extras, dict) else None
        if not isinstance(records, list):
            return
        for rec in records[:64]:
            entry = _entry(exercise, rec, self.profile.smem_per_block)
            if entry is None:
                continue
            key = (entry["exercise"], entry["name"], repr(sorted(entry["constexprs"].items())),
                   entry["num_warps"], entry["num_stages"], entry["autotuned"], entry["shared"])
            if key not in self.kernels and len(self.kernels) >= MAX_KERNELS:
                continue
            kept = self.kernels.setdefault(key, entry)
            if check_id not in kept["checks"] and len(kept["checks"]) < 20:
                kept["checks"].append(check_id)

    def over_limit(self) -> tuple[list[dict], list[dict]]:
        """(kernels that would fail on the target, autotuner configs it would skip instead).

        A config an autotuner benchmarked, or launched after benchmarking, does not fail on the
        target when another config of the same kernel fits: Triton's autotuner there skips the
        ones that run out of resources."""
        entries = list(self.kernels.values())
        tuned_fits = {(e["exercise"], e["name"]) for e in entries if e["autotuned"] and e["fits"]}
        fail, skipped = [], []
        for e in entries:
            if e["fits"] is not False:
                continue
            if e["autotuned"] and (e["exercise"], e["name"]) in tuned_fits:
                skipped.append(e)
            else:
                fail.append(e)
        return fail, skipped

    def to_dict(self, measured_on: str) -> dict:
        """report["target"]."""
        fail, skipped = self.over_limit()
        p = self.profile
        return {"key": p.key, "name": p.name, "short": short(p), "arch": p.arch,
                "smem_per_block": p.smem_per_block, "measured_on": measured_on,
                "header": header(p, measured_on), "note": NOTE,
                "nickname": NICKNAMES.get(p.key, f"the {short(p)}"),
                "calls": self.calls, "kernels": list(self.kernels.values()),
                "over_limit": fail, "autotune_skipped": skipped}


def _entry(exercise: str, rec, limit: int) -> dict | None:
    if not isinstance(rec, dict):
        return None
    tgt = rec.get("target") if isinstance(rec.get("target"), dict) else {}
    shared = _count(tgt.get("shared"))
    constexprs = rec.get("constexprs") if isinstance(rec.get("constexprs"), dict) else {}
    constexprs = {str(k)[:40]: (v if isinstance(v, (bool, int, float)) or v is None else str(v)[:60])
                  for k, v in list(constexprs.items())[:24]}
    error = rec.get("error") or tgt.get("error")
    return {
        "exercise": exercise,
        "name": str(rec.get("name") or "?")[:120],
        "constexprs": constexprs,
        "num_warps": _count(rec.get("num_warps")),
        "num_stages": _count(rec.get("num_stages")),
        "autotuned": rec.get("autotuned") is True,
        "shared_here": _count(rec.get("shared")),
        "arch_here": _count(rec.get("arch")),
        "n_regs": _count(rec.get("n_regs")),
        "n_spills": _count(rec.get("n_spills")),
        "shared": shared,
        "target_arch": _count(tgt.get("arch")),
        "limit": limit,
        "fits": None if shared is None else shared <= limit,
        "error": str(error)[:300] if error else "",
        "checks": [],
    }


def _count(v):
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 40 else None


def describe_kernel(e: dict) -> str:
    """"_flash_fwd BLOCK_M=128, BLOCK_N=128, D=128, num_warps=8, num_stages=3" (student text:
    the caller cleans it for its report)."""
    parts = [f"{k}={v}" for k, v in e.get("constexprs", {}).items()]
    parts += [f"num_warps={e.get('num_warps')}", f"num_stages={e.get('num_stages')}"]
    return f"{e.get('name')} " + ", ".join(parts)


def flag_line(e: dict, target: dict) -> str:
    """One over-limit kernel, in words."""
    arch = e.get("target_arch")
    via = f" (compiled for sm_{arch})" if arch and arch != target.get("arch") else ""
    return (f"{e.get('exercise')}: {describe_kernel(e)}: {e.get('shared')} bytes of shared memory"
            f"{via} > {target.get('smem_per_block')} on {target.get('short')}: with these tiles it "
            f"would fail with out of resources: shared memory on {target.get('nickname')} (Break It 5)")
