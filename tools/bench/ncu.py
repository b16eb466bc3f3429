"""DRAM bytes of a student's Triton kernels, counted by Nsight Compute (ncu) around a sandboxed
worker: a benchmark that measures traffic instead of time.

    line = ncu.missing()                             # None, or the one line: no ncu here
    prof = ncu.profile(sub, "flash_triton", call)    # call(worker) -> its extras, answer checked
    prof.read, prof.written, prof.mine               # bytes over the student's launches

The call runs in a worker under ncu through grader.sandbox.tooled, the one way to run a worker
under a tool (the same sandbox as every worker; at the os level ncu runs as root and the worker
below it as the sandbox user; ncu's log, where its CSV goes, is in a folder only root can write).
`call` checks the answer against a trusted reference, so the bytes of a wrong kernel are never
reported as the kernel's, and returns the call's extras, whose trace names the Triton kernels it
launched (extras["compiled"], extras["triton_kernels"]): only launches of those count, not the
kernels that built the inputs. The names come from beside student code: a lie could misreport a
row of the bench, never a score.

Measurement only, never points, because:
  - ncu replays each kernel (--replay-mode kernel: memory saved and restored between passes),
    flushes the caches before each pass (--cache-control all) and leaves the clocks alone
    (--clock-control none): it counts the traffic of one cold-cache launch, and its time means nothing;
  - its counters need a permission a student's GPU may not grant: most drivers keep them for
    admin users (ERR_NVGPUCTRPERM; RmProfilingAdminOnly in /proc/driver/nvidia/params), the
    student's code runs as an unprivileged user, and many VMs expose no counters at all.
Where ncu is absent or cannot count, `missing` or `Unavailable` says so in one line.
Writes still dirty in L2 when a kernel ends are not in its dram__bytes_write.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

from grader.sandbox import tooled

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
TIMEOUT_S = 600
WAIT_S = 120                   # ncu writes its CSV once the worker has exited
LOG_LIMIT = 16 << 20
TITLE = "HBM bytes (Nsight Compute)"
# ncu's byte units (--print-units base asks for "byte"; older versions scale to the value)
UNITS = {"byte": 1, "B": 1, "Kbyte": 1e3, "KB": 1e3, "Mbyte": 1e6, "MB": 1e6, "Gbyte": 1e9,
         "GB": 1e9, "Tbyte": 1e12, "TB": 1e12, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30,
         "TiB": 2**40}
PARAMS = "/proc/driver/nvidia/params"
# ncu's front end reaches the process it profiles over TCP on 127.0.0.1 (its --port), and the
# os-level sandbox starts the worker in a network namespace of its own, whose loopback is down:
# this step, run as root inside that namespace just before ncu, brings it up (nothing outside
# the namespace becomes reachable) and execs ncu; where it cannot, ncu runs anyway
LOOPBACK_UP = """import fcntl, os, socket, struct, sys
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    flags = struct.unpack("16sH14s", fcntl.ioctl(s, 0x8913, struct.pack("16sH14s", b"lo", 0, b"")))[1]
    fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags | 1, b""))   # SIOCSIFFLAGS, IFF_UP
except OSError:
    pass
os.execv(sys.argv[1], sys.argv[1:])
"""


class Unavailable(Exception):
    """ncu ran but could not count (no permission, no counters on this device): one line."""


def ncu_path() -> str | None:
    return tooled.tool_path("ncu")


def missing() -> str | None:
    """The one line saying there is no ncu here, or None."""
    if ncu_path() is None:
        return (f"{TITLE}: not measured: ncu (Nsight Compute) is not installed here (not on "
                f"PATH, not in /usr/local/cuda/bin)")
    return None


def command(tool, log_path: str, loopback: bool = False) -> list[str]:
    """ncu's command line: the two DRAM counters, CSV, every process below it, into the log;
    `loopback`: after LOOPBACK_UP (the os level). Options a version may lack are asked for only
    where its --help names them."""
    from grader.sandbox.allow_list import interpreter

    cmd = [tool] if isinstance(tool, str) else list(tool)
    if loopback:
        cmd = [interpreter(), "-I", "-S", "-c", LOOPBACK_UP, *cmd]
    known = tooled.help_text(tool) if isinstance(tool, str) else ""
    optional = [opt for opt in (["--print-units", "base"], ["--replay-mode", "kernel"],
                                ["--cache-control", "all"], ["--clock-control", "none"])
                if opt[0] in known]
    return [*cmd, "--metrics", ",".join(METRICS), "--csv", "--target-processes", "all",
            *[part for opt in optional for part in opt], "--log-file", log_path]


def to_bytes(value: str, unit: str) -> float:
    """A CSV cell in bytes: "1,073.74" "Mbyte" -> 1.07374e9 (commas are thousands: the worker's
    locale is C.UTF-8)."""
    if unit not in UNITS:
        raise ValueError(f"ncu gave {value!r} in {unit!r}, not a unit of bytes")
    return float(value.replace(",", "")) * UNITS[unit]


def parse_csv(text: str) -> list[dict]:
    """Each profiled launch, in ncu's order: {"id", "kernel", <metric>: bytes}. The log's
    ==PROF==/==WARNING== lines and anything before the header are skipped."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    launches: dict = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        metric = row.get("Metric Name")
        if metric not in METRICS or row.get("ID") is None:
            continue
        launch = launches.setdefault(row["ID"], {"id": row["ID"],
                                                 "kernel": row.get("Kernel Name", "")})
        launch[metric] = to_bytes(row.get("Metric Value", ""), row.get("Metric Unit", ""))
    return list(launches.values())


def kernel_names(extras: dict) -> list[str]:
    """The Triton kernels the call launched, from its trace."""
    names = {str(c.get("name")) for c in extras.get("compiled") or () if isinstance(c, dict)}
    names |= {str(n) for n in extras.get("triton_kernels") or ()}
    return sorted(n for n in names if n and n != "?")


def matches(kernel: str, names) -> bool:
    """ncu's kernel name is one of `names`: the name itself, or with older Triton's signature
    suffix (_0d1d2d...) or a demangled argument list."""
    return any(re.fullmatch(re.escape(n) + r"(_[0-9][0-9a-z]*)?(\(.*\))?", kernel.strip())
               for n in names)


def refusal(log: str, counted: bool) -> str | None:
    """The one line for a log that shows ncu could not count, or None. `counted`: the CSV has
    launches (an ==ERROR== about the application's exit then changes nothing)."""
    if "ERR_NVGPUCTRPERM" in log:
        why = ("the driver keeps them for admin users (RmProfilingAdminOnly: 1)" if admin_only()
               else "no permission (ERR_NVGPUCTRPERM)")
        return (f"{TITLE}: not measured: ncu may not read this GPU's performance counters: "
                f"{why}, and the student's code runs as an unprivileged user")
    if counted:
        return None
    error = next((line for line in log.splitlines() if line.startswith("==ERROR==")), None)
    if error:
        return f"{TITLE}: not measured: ncu: {error[9:].strip()[:200]}"
    last = next((line.strip() for line in reversed(log.splitlines()) if line.strip()), "")
    return (f"{TITLE}: not measured: ncu counted no kernel (this device may expose no "
            f"counters: a VM?)" + (f"; its log ends {last[:120]!r}" if last else "; no log"))


def admin_only() -> bool:
    """The driver restricts profiling to admin users (its RmProfilingAdminOnly parameter)."""
    try:
        with open(PARAMS) as f:
            return bool(re.search(r"RmProfilingAdminOnly:\s*1", f.read()))
    except OSError:
        return False


@dataclass
class Profile:
    """What ncu counted for one call: every profiled launch, the call's Triton kernels, and
    the launches of those (`mine`) with their bytes summed."""
    launches: list
    kernels: list
    extras: dict = field(default_factory=dict)

    @property
    def mine(self) -> list:
        return [la for la in self.launches if matches(la["kernel"], self.kernels)]

    @property
    def read(self) -> float:
        return sum(la.get(METRICS[0], 0.0) for la in self.mine)

    @property
    def written(self) -> float:
        return sum(la.get(METRICS[1], 0.0) for la in self.mine)


def profile(submission, exercise: str, call, tool=None, mode: str = "cuda") -> Profile:
    """Run `call(worker)` in a worker of `exercise` under ncu; the counts of its launches.
    Raises Unavailable (one line) when ncu could not count, the call's own exception when the
    answer is wrong or the student's code failed, RuntimeError when no launch of the call's
    Triton kernels was counted. `tool`/`mode` let the tests drive it on a CPU with a stand-in."""
    tool = tool or ncu_path()
    with tooled.ToolRun(submission, "ncu.csv", prefix="ncu-") as run:
        cmd = command(tool, run.log_path, loopback=run.level.name == "os")
        sub = run.submission(exercise, mode, cmd)
        sub.timeout_s = TIMEOUT_S
        try:
            extras = call(sub)
        finally:
            run.close(wait_s=WAIT_S)
            log = run.log(LOG_LIMIT)
    prof = Profile(parse_csv(log), kernel_names(extras), extras)
    line = refusal(log, bool(prof.launches))
    if line:
        raise Unavailable(line)
    if not prof.mine:
        seen = sorted({la["kernel"][:60] for la in prof.launches})[:4]
        raise RuntimeError(f"ncu counted no launch of the call's Triton kernels "
                           f"{prof.kernels or '(none traced)'}; it counted {seen}")
    return prof
