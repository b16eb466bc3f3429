"""Isolation from the operating system: how a worker process is started.

Three levels (`choose()` picks one per grading run; the report and results.json say which ran):

  os        Root (Gradescope's container, a GPU box run by an instructor, CI) or asked for with
            GRADER_SANDBOX=1 / --sandbox. The worker runs under util-linux
            `unshare --pid --fork --kill-child --mount --net --ipc --uts`. Inside the new
            namespaces, this file, run as a script by root with `python -I -S` (stdlib only, so
            nothing a submission planted can shadow it), builds an allow-list root on a tmpfs:
            read-only binds of what Python needs (/usr, /lib*, /bin, /sbin, /etc, /opt, the
            interpreter's prefixes and site-packages outside the repo, the `grader` package),
            /dev, /sys read-only, a fresh /proc, a tmpfs /tmp, the worker's scratch folder
            read-write and the submission's `.py` files read-only. Not the repo, `solutions/`,
            `hidden_tests/`, reports, other submissions, /root or /home. It then moves that root
            over `/`, chroots, drops to an unprivileged user (`labstudent` if it exists, else
            `nobody`) with no supplementary groups and PR_SET_NO_NEW_PRIVS, and execs the worker
            with `python -I -B` and an allow-listed environment. The worker is PID 1 of its PID
            namespace: when it dies (or is killed), every process it started dies with it.
  user      Root whose namespaces are refused (Docker's default capabilities, no CAP_SYS_ADMIN):
            the worker runs as a dedicated unprivileged user, kept from the grader's files by
            file permissions (grader/sandbox/user_level.py says what is checked, and how).
            --sandbox accepts it; GRADER_SANDBOX=user asks for it alone.
  process   No privileges (a student on a laptop): the worker is a process in its own session, in
            a scratch folder, with an address-space limit. Where the kernel lets an unprivileged
            user create namespaces, it also gets its own user, PID and network namespaces (no
            network, no process outliving the worker).

GRADER_SANDBOX=0 forces "process"; GRADER_SANDBOX=1 asks for "os", else "user" (and fails closed:
where neither can be had, every check of the run reports that isolation could not be set up, with
both reasons, rather than running unisolated; the report says "Not a grade").
"""

from __future__ import annotations

import json
import os
import sys

# paths inside the allow-list root
INSIDE_LIB = "/sandbox/lib"        # holds the read-only `grader` package
INSIDE_SRC = "/sandbox/src"        # the submission's .py files, read-only
INSIDE_WORK = "/sandbox/work"      # scratch: cwd, HOME, TMPDIR's parent, read-write
INSIDE_CACHE = "/sandbox/kernels"  # the run's Triton cache of this kind of worker, read-write (kernel_cache)
INSIDE_PYCACHE = "/sandbox/pycache"  # the run's bytecode of torch and co., read-only (bytecode)

# ------------------------------------------------------------------------------ the trusted step
# Runs as root inside the new namespaces (`python -I -S isolation.py SPEC`), stdlib only;
# first in this file so that running it imports nothing more (it execs the worker).

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 32, 4096, 8192, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38


def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    return libc, ctypes


def _mount(libc, ctypes, src, dst, fstype, flags, data=None) -> None:
    enc = (lambda s: s.encode() if s is not None else None)
    if libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {src} on {dst}: {os.strerror(err)}")


def _bind(libc, ctypes, src: str, dst: str, writable: bool = False, recursive: bool = False,
          nodev: bool = True) -> None:
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        open(dst, "a").close()
    _mount(libc, ctypes, src, dst, None, MS_BIND | (MS_REC if recursive else 0))
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | (MS_NODEV if nodev else 0) | (0 if writable else MS_RDONLY)
    _mount(libc, ctypes, None, dst, None, flags)
    if recursive and not writable:   # a recursive bind keeps each submount's own flags: lock them too
        for sub in mounts_below(dst):
            _mount(libc, ctypes, None, sub, None, flags)


def mounts_below(folder: str) -> list[str]:
    """Mount points strictly below `folder` in this mount namespace (from /proc/self/mountinfo)."""
    below = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")   # octal escapes, e.g. \040
            if point.startswith(folder.rstrip("/") + "/"):
                below.append(point)
    return below


def mount_tmpfs(folder: str, size: int) -> None:
    """A tmpfs of `size` bytes, mode 0700, on `folder` (grader.sandbox.scratch)."""
    libc, ctypes = _libc()
    _mount(libc, ctypes, "tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,size={size}")


def unmount(point: str) -> None:
    """Detach the mount at `point` (lazily: open files keep it until they close)."""
    libc, _ = _libc()
    libc.umount2(point.encode(), MNT_DETACH)


SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217}
MNT_DETACH = 2


def _switch_root(libc, ctypes, new: str) -> None:
    """Make `new` the root of this mount namespace and drop the old root from it entirely
    (pivot_root, then a lazy unmount): nothing of the host's tree is left to climb back to,
    even from a user namespace the student makes. Where pivot_root is refused, move the new
    root over / and chroot (the old tree is then covered, and a chrooted process may not make
    user namespaces)."""
    number = SYS_PIVOT_ROOT.get(os.uname().machine)
    os.chdir(new)
    if number is not None and libc.syscall(number, b".", b".oldroot") == 0:
        os.chroot(".")
        os.chdir("/")
        if libc.umount2(b"/.oldroot", MNT_DETACH) != 0:
            raise OSError(ctypes.get_errno(), "umount of the old root")
        return
    _mount(libc, ctypes, new, "/", None, MS_MOVE)
    os.chroot(".")
    os.chdir("/")


def enter(spec: dict) -> None:
    """Build the allow-list root, switch to it, drop privileges, exec the worker."""
    libc, ctypes = _libc()
    new = spec["root"]
    _mount(libc, ctypes, None, "/", None, MS_REC | MS_PRIVATE)
    _mount(libc, ctypes, "tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
    at = (lambda p: os.path.join(new, p.lstrip("/")))
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = "/" + name
        if os.path.islink(host):
            os.symlink(os.readlink(host), at(host))
        elif os.path.isdir(host):
            _bind(libc, ctypes, host, at(host))
    # the tmpfs /tmp first: an interpreter or virtualenv that lives under /tmp (a clone in a
    # temporary folder, CI's) is bound on top of it, not hidden by it
    os.makedirs(at("/tmp"))
    _mount(libc, ctypes, "tmpfs", at("/tmp"), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=1g")
    for path in spec["read_only"]:
        # recursive: what is mounted below a path comes along (on GPU machines the driver's
        # libraries are often their own mount, e.g. /usr/local/nvidia); every piece read-only
        _bind(libc, ctypes, path, at(path), recursive=True)
    _bind(libc, ctypes, "/dev", at("/dev"), writable=True, recursive=True, nodev=False)
    if os.path.isdir(at("/dev/shm")):
        _mount(libc, ctypes, "tmpfs", at("/dev/shm"), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=256m")
    if os.path.isdir("/sys"):
        _bind(libc, ctypes, "/sys", at("/sys"), recursive=True)
    os.makedirs(at("/proc"))
    _mount(libc, ctypes, "proc", at("/proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _bind(libc, ctypes, spec["grader"], at(INSIDE_LIB + "/grader"))
    _bind(libc, ctypes, spec["sources"], at(INSIDE_SRC))
    _bind(libc, ctypes, spec["scratch"], at(INSIDE_WORK), writable=True)
    for host, inside in spec.get("writable", []):   # e.g. a root-only folder for a tool's log
        _bind(libc, ctypes, host, at(inside), writable=True)
    for host, inside in spec.get("bound", []):      # the run's bytecode (grader.sandbox.bytecode)
        _bind(libc, ctypes, host, at(inside))
    os.mkdir(at("/.oldroot"))
    _mount(libc, ctypes, None, new, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0755")
    _switch_root(libc, ctypes, new)
    os.chdir(INSIDE_WORK)
    if spec.get("tool"):
        # a tool that watches the worker (compute-sanitizer) stays root, so the student cannot
        # write its log or signal it; its target is this file again, which drops privileges
        drop_spec = {"uid": spec["uid"], "gid": spec["gid"], "argv": spec["argv"], "env": spec["env"]}
        argv = [*spec["tool"], sys.executable, "-I", "-S", INSIDE_LIB + "/grader/sandbox/isolation.py",
                "--drop", json.dumps(drop_spec)]
        os.execve(argv[0], argv, spec["env"])
    drop(spec, libc, ctypes)


def drop(spec: dict, libc=None, ctypes=None, env: dict | None = None) -> None:
    """Drop to the sandbox user (no groups, no way back through setuid binaries or file
    capabilities) and exec the worker."""
    if libc is None:
        libc, ctypes = _libc()
    os.setgroups([])
    os.setgid(spec["gid"])
    os.setuid(spec["uid"])
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)   # cleared by setuid; our parent dying kills us again
    os.execve(spec["argv"][0], spec["argv"], env if env is not None else spec["env"])


if __name__ == "__main__":
    try:
        if sys.argv[1] == "--drop":   # the target of a tool: keep what the tool added to the env
            drop(json.loads(sys.argv[2]), env=dict(os.environ))
        enter(json.loads(sys.argv[1]))
    except BaseException as e:  # noqa: BLE001 - tell the launcher why, on the capture file
        print(f"sandbox setup failed: {type(e).__name__}: {e}", file=sys.stderr)
        os._exit(70)


# ------------------------------------------------------------------------------ choosing a level
import shutil  # noqa: E402 - below the trusted step on purpose (see above)
import subprocess  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

UNSHARE_OS = ["--pid", "--fork", "--kill-child", "--mount", "--net", "--ipc", "--uts"]
UNSHARE_USER = ["--user", "--map-current-user", "--pid", "--fork", "--kill-child", "--net"]
SANDBOX_USERS = ("labstudent", "nobody")
ENV_KEEP = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH",
            "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "LD_LIBRARY_PATH",
            "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TRITON_INTERPRET", "TRITON_PTXAS_PATH",
            "TRITON_LIBCUDA_PATH", "PYTORCH_NO_CUDA_MEMORY_CACHING", "GRADER_TIMEOUT_SCALE")
FILE_LIMIT_BYTES = 256 << 20       # largest file a worker may write: its printed output included
PROCESS_LIMIT = 4096               # RLIMIT_NPROC of the sandbox user (processes and threads), os level


@dataclass
class Level:
    name: str                  # "os", "user", "process", or "unavailable" (asked for, cannot be had)
    description: str           # one line for the report
    unshare: list = field(default_factory=list)   # the unshare prefix, [] for none
    uid: int | None = None
    gid: int | None = None
    reason: str = ""           # why "os" (and "user") is unavailable

    @property
    def as_student(self) -> bool:
        """Student code runs as a user of its own (os and user levels)."""
        return self.name in ("os", "user")


_CHOSEN: dict = {}


def requested() -> str:
    """'os', 'user', 'process' or 'auto': the grade's option `sandbox` (--sandbox,
    --no-sandbox, GRADER_SANDBOX)."""
    from grader import options   # below the trusted step, as every import here

    return options.current().sandbox


def choose() -> Level:
    """The isolation level of this run (probed once per process)."""
    want = requested()
    if want in _CHOSEN:
        return _CHOSEN[want]
    level = None
    # --refuse-levels os,user: the repo's tests play a container that refuses them (it can
    # only make a grade fail, never run student code with less isolation)
    from grader import options

    refused = options.current().refuse_levels
    if want in ("os", "user") or (want == "auto" and os.geteuid() == 0):
        why = "not asked for (GRADER_SANDBOX=user)"
        if want != "user":
            level, why = _os_level() if "os" not in refused else (None, "refused (--refuse-levels)")
        if level is None:
            from grader.sandbox import user_level   # below the trusted step, as every import here

            found, why_user = (user_level.level(_repo(), interpreter(), UNSHARE_USER)
                               if "user" not in refused else (None, "refused (--refuse-levels)"))
            if found is not None:
                level = Level("user", found["description"], found["unshare"], found["uid"], found["gid"])
            if level is None and want != "auto":
                why = f"os isolation: {why}; user isolation: {why_user}"
                level = Level("unavailable", f"isolation asked for but unavailable: {why}", reason=why)
    if level is None:
        level = _process_level()
    _CHOSEN[want] = level
    return level


def _repo() -> str:
    """The grader's folder: the parent of the `grader` package (hidden_tests/ and solutions/
    live there)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _os_level() -> tuple[Level | None, str]:
    if sys.platform != "linux":
        return None, "needs Linux namespaces"
    if os.geteuid() != 0:
        return None, "needs root (Gradescope, CI and instructors' GPU boxes run as root)"
    unshare = shutil.which("unshare") or "/usr/bin/unshare"
    if not _works([unshare, *UNSHARE_OS, "--", "/bin/true"]):
        return None, "`unshare --pid --mount --net` failed (no namespaces in this container?)"
    import pwd

    for name in SANDBOX_USERS:
        try:
            user = pwd.getpwnam(name)
        except KeyError:
            continue
        if user.pw_uid == 0:
            continue
        return Level("os", f"os: pid+mount+net+ipc namespaces, allow-list root, uid {name}",
                     [*_die_with_grader(), unshare, *UNSHARE_OS], user.pw_uid, user.pw_gid), ""
    return None, f"none of the users {', '.join(SANDBOX_USERS)} exists"


def _process_level() -> Level:
    why = "GRADER_SANDBOX=0" if requested() == "process" else "not root"
    unshare = shutil.which("unshare")
    if sys.platform == "linux" and unshare and _works([unshare, *UNSHARE_USER, "--", "/bin/true"]):
        return Level("process", f"process only ({why}): own session, scratch cwd, user+pid+net "
                                f"namespaces; files readable by you are readable by the submission",
                     [unshare, *UNSHARE_USER])
    return Level("process", f"process only ({why}, no namespaces): own session and scratch cwd; "
                            f"the submission runs as you")


def _die_with_grader() -> list:
    """`setpriv --pdeathsig KILL` where util-linux has it: unshare (and with it the whole PID
    namespace) is killed if the grader itself dies, even while student code loops."""
    setpriv = shutil.which("setpriv")
    if setpriv and _works([setpriv, "--pdeathsig", "KILL", "/bin/true"]):
        return [setpriv, "--pdeathsig", "KILL"]
    return []


def _works(cmd: list) -> bool:
    try:
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# ------------------------------------------------------------------------------ the allow-list


def interpreter() -> str:
    """sys.executable with its folder's symlinks resolved and its file name kept: a virtualenv
    reached through a symlink (repo/.venv -> /elsewhere/venv) is bound at its real place, and its
    python still finds the pyvenv.cfg beside it (the fully resolved file would be the base
    interpreter, without the venv's packages)."""
    return os.path.join(os.path.realpath(os.path.dirname(sys.executable)), os.path.basename(sys.executable))


def start_trusted(flags: list[str], code: str) -> subprocess.Popen | None:
    """A Python process of the grader's own, `python -I <flags> -c code`: code written in the
    grader, the grader's uid, no submission on its path (-I: neither the working folder nor
    PYTHON* variables), detached and silent; the caller waits for it or kills it. None when it
    cannot start. The bytecode builder (grader.sandbox.bytecode) is the one caller."""
    try:
        return subprocess.Popen([interpreter(), "-I", *flags, "-c", code],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return None


def read_only_paths(repo: str, exclude: list[str]) -> list[str]:
    """Host paths bound read-only at the same place: what Python and its packages need.

    Never the repo (except the interpreter's own prefix if it lives there, e.g. repo/.venv) or
    anything in `exclude` (the submission, reports), nor a folder that contains one of them."""
    repo = os.path.realpath(repo)
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    wanted = ["/usr", "/etc", "/opt", *prefixes]
    wanted += [p for p in sys.path if p and os.path.isdir(p)]
    for exe in (sys.executable, os.path.realpath(sys.executable)):
        wanted.append(os.path.dirname(exe))
    out: list[str] = []
    for p in wanted:
        p = os.path.realpath(p)
        if not os.path.isdir(p) or p == "/":
            continue
        if _inside(repo, p) or any(_inside(x, p) or _inside(p, x) for x in exclude):
            continue  # p is the repo or holds it, or touches a protected path
        if _inside(p, repo) and not any(_inside(p, pre) for pre in prefixes):
            continue  # inside the repo, and not the interpreter's own prefix
        if any(_inside(p, q) for q in out):
            continue
        out = [q for q in out if not _inside(q, p)] + [p]
    return sorted(out)


def _inside(path: str, folder: str) -> bool:
    """path is folder or below it."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def environment(mode: str, home: str, tmp: str = "/tmp") -> dict:
    """The worker's whole environment: an allow-list. `tmp`: its TMPDIR (its scratch where /tmp
    is the machine's own, shared)."""
    env = {k: os.environ[k] for k in ENV_KEEP if k in os.environ}
    env.update(PATH="/usr/local/bin:/usr/bin:/bin", HOME=home, TMPDIR=tmp, USER="student",
               LOGNAME="student", LANG=env.get("LANG", "C.UTF-8"), PYTHONDONTWRITEBYTECODE="1",
               PYTHONNOUSERSITE="1", TRITON_CACHE_DIR=os.path.join(home, ".triton"),
               MPLCONFIGDIR=os.path.join(home, ".matplotlib"), XDG_CACHE_HOME=os.path.join(home, ".cache"))
    bindir = os.path.dirname(interpreter())
    env["PATH"] = f"{bindir}:{env['PATH']}"
    if mode == "interp":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    if mode in ("cpu", "interp"):
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env
