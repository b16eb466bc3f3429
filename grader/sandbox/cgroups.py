"""The per-worker cgroups the launcher puts each sandboxed worker in (memory, CPU weight, a pids
limit), made on the host before the worker starts and removed after it stops; moved out of
grader/sandbox/confine.py, which runs as a script inside the sandbox. `MemoryCgroup`
reads (and resets) a worker's memory cgroup from the grader's side: grader/sandbox/memory.py."""

from __future__ import annotations

import os


class WorkerCgroup:
    """Cgroups for one worker, where the machine lets us make them (cgroup v1 `pids` and `cpu`
    hierarchies, or v2 with those controllers delegated):
      pids  every task the worker starts counts, up to PIDS_MAX: a fork bomb stops there
            without touching anyone else's processes;
      cpu   the whole worker weighs as much as one busy process per core (up to 8), however many
            threads or processes it starts: the grader and other workers keep their share;
      memory  no limit (RLIMIT_AS does that), only the count: the peak of the whole process
            tree, read and reset by the grader (MemoryCgroup), never by the worker (/sys is
            read-only in the sandbox, and the files belong to root).
    `make` returns None where none is available."""

    def __init__(self, paths: list):
        self.paths = paths

    @classmethod
    def make(cls, name: str) -> "WorkerCgroup | None":
        paths = []
        cores = min(os.cpu_count() or 1, 8)   # a worker weighs as much as one busy process per core
        for controller, settings in (("pids", {"pids.max": str(PIDS_MAX)}),
                                     ("cpu", {"cpu.shares": str(1024 * cores),
                                              "cpu.weight": str(100 * cores)}),
                                     ("memory", {})):
            base = cgroup_base(controller)
            if base is None:
                continue
            path = os.path.join(base, name)
            made = path not in paths   # cgroup v2: one folder holds every controller
            try:
                if made:
                    os.mkdir(path, 0o755)
                wrote = False
                for key, value in settings.items():
                    if os.path.exists(os.path.join(path, key)):
                        with open(os.path.join(path, key), "w") as f:
                            f.write(value)
                        wrote = True
                if settings and not wrote and made:
                    raise OSError("no setting to write")
            except OSError:
                if made:
                    try:
                        os.rmdir(path)
                    except OSError:
                        pass
                continue
            if made:
                paths.append(path)
        return cls(paths) if paths else None

    def wrap(self, argv: list) -> list:
        """argv, started inside these cgroups (a shell moves itself in, then execs argv)."""
        moves = " && ".join(f'echo $$ > "${i + 1}"' for i in range(len(self.paths)))
        procs = [os.path.join(p, "cgroup.procs") for p in self.paths]
        shift = f"shift {len(procs)}"
        return ["/bin/sh", "-c", f'{moves} && {shift} && exec "$@"', "cgroup-enter", *procs, *argv]

    def remove(self, wait_s: float = 5.0) -> None:
        """Remove the cgroups once their tasks are gone (a killed PID namespace takes a moment)."""
        import time

        deadline = time.monotonic() + wait_s
        for path in self.paths:
            while True:
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.01)


PIDS_MAX = 1024
_BASES: dict = {}


class MemoryCgroup:
    """The memory cgroup of one worker, as the grader reads it (v1 or v2):

        usage()        bytes charged now to every process of the worker's tree
        reset_peak()   start a new peak here (v1: memory.max_usage_in_bytes; v2: memory.peak,
                       which since Linux 6.12 resets per open file: the grader keeps its own)
        peak()         the largest usage since the reset (or since the cgroup was made, where
                       v2's peak cannot be reset: `resettable` is then False)

    `of(pid)` finds it from /proc/<pid>/cgroup, and only a cgroup the launcher made for a worker
    (a `grader-...` folder) that is not the grader's own: anything else would count other
    processes too."""

    def __init__(self, path: str, v2: bool):
        self.path, self.v2 = path, v2
        self._peak_fd: int | None = None
        self.resettable = not v2

    @classmethod
    def of(cls, pid: int) -> "MemoryCgroup | None":
        base = cgroup_base("memory")
        if base is None:
            return None
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                lines = [line.rstrip("\n").split(":", 2) for line in f]
        except OSError:
            return None
        v2 = not base.startswith("/sys/fs/cgroup/memory")   # cgroup_base's two kinds of folder
        if v2:
            found = next((p for h, ctl, p in lines if h == "0" and ctl == ""), None)
        else:
            found = next((p for _, ctl, p in lines if "memory" in ctl.split(",")), None)
        if not found:
            return None
        path = os.path.join("/sys/fs/cgroup" if v2 else "/sys/fs/cgroup/memory", found.lstrip("/"))
        if not os.path.basename(path).startswith("grader-") or os.path.dirname(path) != base:
            return None
        return cls(path, v2)

    def _read(self, name: str) -> int:
        with open(os.path.join(self.path, name)) as f:
            return int(f.read().split()[0])

    def usage(self) -> int:
        return self._read("memory.current" if self.v2 else "memory.usage_in_bytes")

    def reset_peak(self) -> None:
        if not self.v2:
            with open(os.path.join(self.path, "memory.max_usage_in_bytes"), "w") as f:
                f.write("0")
            return
        if self._peak_fd is None:
            self._peak_fd = os.open(os.path.join(self.path, "memory.peak"), os.O_RDWR)
        try:
            os.write(self._peak_fd, b"reset\n")
            self.resettable = True
        except OSError:
            self.resettable = False   # before Linux 6.12: the peak since the cgroup was made

    def peak(self) -> int:
        if not self.v2:
            return self._read("memory.max_usage_in_bytes")
        if self._peak_fd is None:
            return self._read("memory.peak")
        return int(os.pread(self._peak_fd, 64, 0).split()[0])

    def close(self) -> None:
        if self._peak_fd is not None:
            os.close(self._peak_fd)
            self._peak_fd = None


def cgroup_base(controller: str) -> str | None:
    """The folder under which this process may make cgroups with `controller`, or None."""
    if controller in _BASES:
        return _BASES[controller]
    base = None
    try:
        with open("/proc/self/cgroup") as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f]
        v1 = next((p for _, ctl, p in lines if controller in ctl.split(",")), None)
        v2 = next((p for h, ctl, p in lines if h == "0" and ctl == ""), None)
        mount = f"/sys/fs/cgroup/{controller}"
        if v1 is not None and os.path.isdir(mount):
            base = mount + v1.rstrip("/")
        elif v2 is not None and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            here = "/sys/fs/cgroup" + v2.rstrip("/")
            with open(os.path.join(here, "cgroup.subtree_control")) as f:
                if controller in f.read().split():
                    base = here
        if base is not None and not os.access(base, os.W_OK):
            base = None
    except OSError:
        base = None
    _BASES[controller] = base
    if base is not None:
        _remove_stale(base)
    return base


def _remove_stale(base: str) -> None:
    """Empty cgroups left by graders that have exited (a big PID namespace can take longer to
    die than `remove` waits)."""
    try:
        names = [n for n in os.listdir(base) if n.startswith("grader-")]
    except OSError:
        return
    for name in names:
        owner = name.split("-")[1]
        if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            try:
                os.rmdir(os.path.join(base, name))
            except OSError:
                pass
