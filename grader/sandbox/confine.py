"""The trusted step that confines a worker at the os level, and drops it to the student's uid.

Run as root inside the new namespaces, as a script (`python -I -S confine.py SPEC`: stdlib only,
so nothing a submission planted can shadow it, and running it imports nothing more: it execs the
worker). `enter` builds the allow-list root on a tmpfs (read-only binds of what Python needs, the
paths grader.sandbox.allow_list chose; /dev, /sys read-only, a fresh /proc, a tmpfs /tmp, the
worker's scratch read-write, the submission's `.py` files read-only), makes it the root of the
mount namespace and drops privileges. `drop` (`confine.py --drop SPEC`) is the last part alone:
the target of a tool that stays root, and the user level's step to the student's uid
(grader.sandbox.user_level). The mount helpers also serve the run's scratch tmpfs
(grader.sandbox.scratch). Which level a run gets is grader.sandbox.isolation's choice.
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
        argv = [*spec["tool"], sys.executable, "-I", "-S", INSIDE_LIB + "/grader/sandbox/confine.py",
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
