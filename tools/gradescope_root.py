"""python -m tools.gradescope_root: the Gradescope zip run as Gradescope runs it, in a root made with
debootstrap (Ubuntu 22.04 "jammy", Gradescope's default base image, with its Python 3.10).

    python -m tools.gradescope_root build [--root /srv/jammy] [--suite jammy]

makes the root once (debootstrap --variant=minbase, then the suite's updates and universe in its
sources.list, as in the ubuntu:22.04 image). tests/test_gradescope_root.py (`make
gradescope-jammy`) then uses `Image`: the zip unpacked into /autograder/source of an overlay on
that root, setup.sh run there as root (Gradescope's image build), and each submission graded by
/autograder/run_autograder in a fresh overlay of its own, in its own PID and mount namespaces,
under a cgroup memory limit and CPU quota (Gradescope's defaults: 768 MB, half a vCPU), /sys
read-only, optionally without CAP_SYS_ADMIN (Docker's default capabilities).

Needs root, debootstrap, overlayfs and cgroups (v1 or v2) on the machine that runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
PIP_CACHE = Path("/root/.cache/pip")   # the host's, bound into the root: setup.sh downloads once
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# the host's CA bundle, for pip in the root (a machine whose HTTPS goes through a proxy of its own)
HOST_CA, ROOT_CA = Path("/etc/ssl/certs/ca-certificates.crt"), "/usr/local/share/lab-host-ca.crt"


def build(root: Path, suite: str = "jammy") -> None:
    """debootstrap `suite` into `root` (nothing if it is there). The mirror is debootstrap's
    default for the suite; without the suite's keyring on this machine, unchecked."""
    if (root / "usr" / "bin" / "apt-get").exists():
        return
    keyring = Path("/usr/share/keyrings/ubuntu-archive-keyring.gpg")
    check = [] if suite not in ("jammy", "noble") or keyring.exists() else ["--no-check-gpg"]
    subprocess.run(["debootstrap", "--variant=minbase", *check, suite, str(root)], check=True)
    sources = root / "etc" / "apt" / "sources.list"
    line = sources.read_text().split("\n")[0].split()
    if suite in ("jammy", "noble") and len(line) >= 3:   # `deb MIRROR jammy main`, as written
        mirror = line[1]
        sources.write_text("".join(f"deb {mirror} {suite}{part} main restricted universe\n"
                                   for part in ("", "-updates", "-security")))


class Cgroup:
    """A memory limit and a CPU quota (v1 or v2) for what runs inside; its peak memory."""

    def __init__(self, name: str, memory_mb: int, cpus: float):
        self.v2 = (CGROUP / "cgroup.controllers").exists()
        self.dirs = [CGROUP / name] if self.v2 else [CGROUP / "memory" / name, CGROUP / "cpu" / name]
        for d in self.dirs:
            d.mkdir(exist_ok=True)
        period = 100_000
        if self.v2:
            (self.dirs[0] / "memory.max").write_text(str(memory_mb << 20))
            (self.dirs[0] / "cpu.max").write_text(f"{int(cpus * period)} {period}")
        else:
            (self.dirs[0] / "memory.limit_in_bytes").write_text(str(memory_mb << 20))
            (self.dirs[1] / "cpu.cfs_period_us").write_text(str(period))
            (self.dirs[1] / "cpu.cfs_quota_us").write_text(str(int(cpus * period)))

    def enter(self) -> str:
        """A shell line that moves the shell running it into these cgroups."""
        return "; ".join(f"echo $$ > {d / 'cgroup.procs'}" for d in self.dirs)

    def peak_mb(self) -> float:
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        try:
            return int((self.dirs[0] / name).read_text()) / 2**20
        except (OSError, ValueError):
            return float("nan")

    def oom_kills(self) -> int:
        text = (self.dirs[0] / ("memory.events" if self.v2 else "memory.oom_control")).read_text()
        return next((int(line.split()[1]) for line in text.splitlines() if line.startswith("oom_kill ")), 0)

    def remove(self) -> None:
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)


def in_root(lower: list[Path], upper: Path, command: str, env: dict, cgroup: Cgroup | None = None,
            no_sys_admin: bool = False, pip_cache: bool = False, timeout: float = 1800) -> subprocess.CompletedProcess:
    """`command` (bash) as root in an overlay of `lower` (first on top) with `upper` kept, in PID
    and mount namespaces of its own, /proc fresh, /dev bound, /sys read-only."""
    work, merged = upper.parent / (upper.name + ".work"), upper.parent / (upper.name + ".merged")
    for d in (upper, work, merged):
        d.mkdir(parents=True, exist_ok=True)
    q = shlex.quote
    m = q(str(merged))
    setup = [f"mount -t overlay overlay -o lowerdir={':'.join(map(str, lower))},upperdir={upper},workdir={work} {m}",
             f"mount -t proc proc {m}/proc", f"mount --rbind /dev {m}/dev",
             f"mount --rbind /sys {m}/sys", f"mount -o remount,bind,ro {m}/sys",
             f"cp /etc/resolv.conf {m}/etc/resolv.conf"]
    if pip_cache:
        PIP_CACHE.mkdir(parents=True, exist_ok=True)
        setup += [f"mkdir -p {m}/root/.cache/pip", f"mount --bind {PIP_CACHE} {m}/root/.cache/pip"]
    if HOST_CA.exists():
        setup.append(f"cp {HOST_CA} {m}{ROOT_CA}")
        env = {"PIP_CERT": ROOT_CA, **env}
    variables = " ".join(f"{k}={q(v)}" for k, v in {"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8", **env}.items())
    run = f"chroot {m} /usr/bin/env -i {variables} /bin/bash -c {q(command)}"
    if no_sys_admin:
        run = f"capsh --drop=cap_sys_admin -- -c {q('exec ' + run)}"
    script = "\n".join(["set -e", *setup, f"exec {run}"])
    outer = f"{cgroup.enter()}; " if cgroup else ""
    argv = ["/bin/sh", "-c", outer + 'exec "$@"', "enter",
            "unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "--",
            "/bin/sh", "-c", script]   # --kill-child: a run stopped (a test's timeout) takes its container along
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


class Image:
    """The zip's image: setup.sh run once in an overlay on `root`; `grade` runs submissions."""

    def __init__(self, root: Path, zip_path: Path, work: Path, env: dict | None = None,
                 built: Path | None = None):
        """`built`: the image layer of an earlier Image of the same zip, kept (no setup.sh)."""
        self.root, self.work = root, work
        self.layer = built or work / "image"
        self.setup_s, self.setup = 0.0, None
        if built is not None:
            return
        self.layer.mkdir(parents=True)
        source = self.layer / "autograder" / "source"
        with zipfile.ZipFile(zip_path) as zf:
            for info in zf.infolist():   # extractall drops the permission bits
                zf.extract(info, source)
                os.chmod(source / info.filename, info.external_attr >> 16)
        start = time.monotonic()
        self.setup = in_root([root], self.layer, "cd /autograder/source && ./setup.sh && "
                             "cp /autograder/source/run_autograder /autograder/run_autograder",
                             env or {}, pip_cache=True)
        self.setup_s = time.monotonic() - start
        if self.setup.returncode != 0:
            raise RuntimeError(f"setup.sh failed ({self.setup.returncode}):\n{self.setup.stdout[-3000:]}\n{self.setup.stderr[-3000:]}")

    def grade(self, upload: dict, memory_mb: int = 768, cpus: float = 0.5, no_sys_admin: bool = False,
              env: dict | None = None) -> dict:
        """`upload` {path in the upload: file} graded in a fresh container; results.json, with
        the run's stdout, its seconds, its cgroup's peak memory and OOM kills added under '_run'."""
        run = self.work / f"run-{time.monotonic_ns()}"
        submission = run / "upper" / "autograder" / "submission"
        submission.mkdir(parents=True)
        for rel, src in upload.items():
            (submission / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, submission / rel)
        cgroup = Cgroup(f"lab-gradescope-{os.getpid()}-{run.name}", memory_mb, cpus)
        try:
            start = time.monotonic()
            proc = in_root([self.layer, self.root], run / "upper", "/autograder/run_autograder",
                           env or {}, cgroup=cgroup, no_sys_admin=no_sys_admin)
            seconds = time.monotonic() - start
            peak, ooms = cgroup.peak_mb(), cgroup.oom_kills()
        finally:
            cgroup.remove()
        results = run / "upper" / "autograder" / "results"
        out = json.loads((results / "results.json").read_text()) if (results / "results.json").exists() else {}
        out["_run"] = {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr[-4000:],
                       "seconds": seconds, "peak_mb": peak, "oom_kills": ooms}
        shutil.rmtree(run, ignore_errors=True)
        return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.gradescope_root", description=__doc__.splitlines()[0])
    p.add_argument("action", choices=["build"])
    p.add_argument("--root", default="/srv/jammy")
    p.add_argument("--suite", default="jammy")
    args = p.parse_args(argv)
    build(Path(args.root), args.suite)
    print(f"gradescope_root: {args.root} holds {args.suite}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
