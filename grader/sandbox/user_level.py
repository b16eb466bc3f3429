"""The "user" isolation level: root, but no namespaces of root's own (a container with Docker's
default capabilities: no CAP_SYS_ADMIN, so `unshare --mount` is refused).

The worker then runs as a dedicated unprivileged user: a uid (and gid) of UID_RANGE that no name
and no file has, one per grader process (`student_ids`). The launcher starts `confine.py --drop`
as root, which clears the supplementary groups, sets the gid and uid, sets PR_SET_NO_NEW_PRIVS
and execs the worker; the worker sets its rlimits as at the os
level (RLIMIT_NPROC counts every process of that uid). What the user may not read is kept from it
by file permissions, checked here by a probe that runs as that user before any student code:

  - the grader's folder (the `grader` package's parent: hidden_tests/, solutions/ and reports
    where they live there) must not be traversable by it: run_autograder makes
    /autograder/source 0700;
  - the interpreter and its packages must be (a virtualenv inside the grader's folder, or under a
    0700 /root, cannot be used: the level is then unavailable, with that reason);
  - the worker gets a copy of the `grader` package (public code, as at the os level), its own
    scratch (owned by it, 0700) and the submission's files (read-only), in a grader folder it may
    traverse but not list.

Where that user may still make user namespaces (not in a chroot, nor under Docker's seccomp
profile), the worker also gets its own user, PID and network namespaces. Either way, when the
last worker of the level stops, every process left to that uid is killed and its files at the top
of /tmp, /var/tmp and /dev/shm are removed (`reap`).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

# confine.py's --drop step (run by path, as a script of the stdlib alone)
DROP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "confine.py")
UID_RANGE = range(61000, 65000)   # no name, no files; inside a 16-bit mapped container's range
LOCKS = "/run/lock/grader-uids"  # root-only: one held lock file per uid in use
# Run as the student: 0 when the grader's folder is closed to it, 3 when it is open
PROBE = ("import os, sys\ntry:\n    os.stat(os.path.join(sys.argv[1], 'grader'))\n"
         "except PermissionError:\n    sys.exit(0)\nsys.exit(3)\n")
_HELD: list = []


def student_ids() -> tuple[int, int, str]:
    """A uid (and the same gid) of this grader process alone, held with a lock for as long as it
    runs: two grades at this level at once (`batch --jobs 2`) never share a user, so one cannot
    read the other's scratch, count against its RLIMIT_NPROC or be killed by its `reap`."""
    if _HELD:
        return _HELD[0], _HELD[0], f"uid {_HELD[0]}"
    import fcntl

    folder = LOCKS if os.path.isdir(os.path.dirname(LOCKS)) else "/tmp/grader-uids"
    os.makedirs(folder, mode=0o700, exist_ok=True)
    st = os.lstat(folder)   # in /tmp a student of an earlier grade could have made it first
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o077:
        raise OSError(f"{folder} is not a folder of root's alone")
    start = os.getpid() % len(UID_RANGE)
    for i in range(len(UID_RANGE)):
        uid = UID_RANGE[(start + i) % len(UID_RANGE)]
        fd = os.open(os.path.join(folder, str(uid)), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        _HELD.append(uid)   # the descriptor stays open: the lock lasts as long as this process
        return uid, uid, f"uid {uid}"
    raise OSError("every uid of the user level is in use")


def as_student(python: str, uid: int, gid: int, argv: list) -> list:
    """argv, run as uid/gid with no groups and no_new_privs (confine.py's --drop step, started
    by `python`)."""
    spec = {"uid": uid, "gid": gid, "argv": argv}
    return [python, "-I", "-S", DROP, "--drop", json.dumps(spec)]


def _run_as(python: str, uid: int, argv: list) -> int:
    try:
        return subprocess.run(as_student(python, uid, uid, argv), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, cwd="/",
                              timeout=30).returncode
    except (OSError, subprocess.TimeoutExpired):
        return -1


def level(repo: str, python: str, unshare_user: list) -> tuple[dict | None, str]:
    """The user level where this process can have it: its uid, gid, unshare prefix and one-line
    description; else None and why not. `python`: the worker's interpreter; `unshare_user`: the
    options of the student's own namespaces."""
    if sys.platform != "linux" or not hasattr(os, "setgroups"):
        return None, "needs Linux"
    if os.geteuid() != 0:
        return None, "needs root to start student code as another user"
    try:
        uid, gid, name = student_ids()
    except OSError as e:
        return None, f"no uid for the student: {e}"
    code = _run_as(python, uid, [python, "-I", "-c", PROBE, repo])
    if code == 3:
        return None, (f"the grader's folder {repo} is open to {name}: make it 0700 "
                      f"(run_autograder does this for /autograder/source)")
    if code != 0:
        return None, (f"{name} cannot run {python} (is the interpreter inside the grader's "
                      f"folder, or under a folder closed to other users?)")
    found = {"uid": uid, "gid": gid, "unshare": []}
    unshare = shutil.which("unshare")
    if unshare and _run_as(python, uid, [unshare, *unshare_user, "--", "/bin/true"]) == 0:
        found["unshare"] = [unshare, *unshare_user]
        found["description"] = (f"user: {name} (no groups, no_new_privs), rlimits, own user+pid+net "
                                f"namespaces; namespaces of root's own refused here")
    else:
        found["description"] = (f"user: {name} (no groups, no_new_privs), rlimits, file permissions; "
                                f"no namespaces here (the network is reachable)")
    return found, ""


def open_base(base) -> None:
    """The grader's per-run folder, traversable but not listable by the student (its scratch,
    the sources and the lib copy are reached by name)."""
    os.chmod(base, 0o711)


def lib_copy(grader_dir, base) -> str:
    """A copy of the `grader` package the student may read (once per folder): the grader's own
    folder is closed to it. Directories 0555, files 0444, owned by root."""
    lib = os.path.join(base, "lib")
    target = os.path.join(lib, "grader")
    if not os.path.isdir(target):
        os.makedirs(lib, exist_ok=True)
        shutil.copytree(grader_dir, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for folder, dirs, files in os.walk(lib):
            for f in files:
                os.chmod(os.path.join(folder, f), 0o444)
            os.chmod(folder, 0o555)
    return lib


SHARED = ("/tmp", "/var/tmp", "/dev/shm")   # the machine's own at this level: shared with what follows


def reap(python: str, uid: int) -> None:
    """Kill every process of uid (kill(-1) sent as that uid reaches only its own processes) and
    remove what it left at the top of the shared folders: nothing student code started or
    planted outlives the last worker, even without a PID or mount namespace. The uid is this
    grader's alone (`student_ids`), so nothing else is touched."""
    _run_as(python, uid, [python, "-I", "-S", "-c", "import os; os.kill(-1, 9)"])
    for folder in SHARED:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass
