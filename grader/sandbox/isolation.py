"""Which isolation from the operating system a grading run gets, and the grader's own processes
that probe for it.

Three levels (`choose()` picks one per grading run; the report and results.json say which ran):

  os        Root (Gradescope's container, a GPU box run by an instructor, CI) or asked for with
            GRADER_SANDBOX=1 / --sandbox. The worker runs under util-linux
            `unshare --pid --fork --kill-child --mount --net --ipc --uts`. Inside the new
            namespaces, grader/sandbox/confine.py, run as a script by root with `python -I -S`
            (stdlib only, so nothing a submission planted can shadow it), builds an allow-list
            root on a tmpfs: read-only binds of what Python needs (/usr, /lib*, /bin, /sbin,
            /etc, /opt, the interpreter's prefixes and site-packages outside the repo, the
            `grader` package: grader/sandbox/allow_list.py),
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

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

from grader import options
from grader.sandbox import user_level
from grader.sandbox.allow_list import interpreter

UNSHARE_OS = ["--pid", "--fork", "--kill-child", "--mount", "--net", "--ipc", "--uts"]
UNSHARE_USER = ["--user", "--map-current-user", "--pid", "--fork", "--kill-child", "--net"]
SANDBOX_USERS = ("labstudent", "nobody")


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
    return options.current().sandbox


def choose() -> Level:
    """The isolation level of this run (probed once per process)."""
    want = requested()
    if want in _CHOSEN:
        return _CHOSEN[want]
    level = None
    # --refuse-levels os,user: the repo's tests play a container that refuses them (it can
    # only make a grade fail, never run student code with less isolation)
    refused = options.current().refuse_levels
    if want in ("os", "user") or (want == "auto" and os.geteuid() == 0):
        why = "not asked for (GRADER_SANDBOX=user)"
        if want != "user":
            level, why = _os_level() if "os" not in refused else (None, "refused (--refuse-levels)")
        if level is None:
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
