"""A seccomp filter the worker installs on itself: no new process, no exec, and in the CPU
modes no new thread, enforced by the kernel whatever the Python code around it does.

Classic BPF written by hand (no libseccomp on the grading machines, nothing can be installed on
the GPU box) and installed with two prctl calls through ctypes:

    prctl(PR_SET_NO_NEW_PRIVS, 1)                       # lets an unprivileged process filter
    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)   # irrevocable, kept across every call

The program, per system call (struct seccomp_data: nr at 0, arch at 4, args[0] at 16):
    arch is not this build's      -> EPERM  (an i386 `int 0x80` on x86_64 names other numbers)
    x86_64 x32 numbers (bit 30)   -> EPERM  (the same calls under other numbers)
    execve, execveat, fork, vfork -> EPERM
    clone3                        -> ENOSYS (its flags live in memory BPF cannot read: glibc
                                             then falls back to clone, whose flags it can)
    clone without CLONE_THREAD    -> EPERM  (a process: fork(), posix_spawn's vfork-style clone)
    clone with CLONE_THREAD       -> EPERM with `threads=True`, else allowed
    anything else                 -> allowed
Python then raises PermissionError from os.fork/subprocess/posix_spawn and RuntimeError("can't
start new thread") from threading. The filter is inherited by nothing (no child can start) and
cannot be removed: a later filter the student adds can only deny more.

Only x86_64 and aarch64 (the DGX Spark) are known; anywhere else nothing is installed and the
level says why. The worker reports the level it got (`install`'s return value) in its ping reply.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
from typing import NamedTuple

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
CLONE_THREAD = 0x00010000
X32_SYSCALL_BIT = 0x40000000

# classic BPF opcodes (linux/filter.h)
LD_ABS_W = 0x20      # BPF_LD | BPF_W | BPF_ABS: A = 32-bit word of seccomp_data at k
JEQ = 0x15           # BPF_JMP | BPF_JEQ | BPF_K
JGE = 0x35           # BPF_JMP | BPF_JGE | BPF_K
JSET = 0x45          # BPF_JMP | BPF_JSET | BPF_K
RET = 0x06           # BPF_RET | BPF_K
NR, ARCH, ARG0_LOW = 0, 4, 16   # offsets in struct seccomp_data (args are 64-bit, little-endian)


class Arch(NamedTuple):
    audit: int                  # AUDIT_ARCH_* in seccomp_data.arch
    clone: int
    clone3: int
    denied: tuple[int, ...]     # denied outright with EPERM
    x32: bool                   # x86_64's x32 ABI: the same calls again, numbered from bit 30


# asm/unistd.h of each: aarch64 has no fork or vfork syscall (glibc forks with clone)
ARCHES = {
    "x86_64": Arch(0xC000003E, clone=56, clone3=435, x32=True,
                   denied=(59, 322, 57, 58)),        # execve, execveat, fork, vfork
    "aarch64": Arch(0xC00000B7, clone=220, clone3=435, x32=False,
                    denied=(221, 281)),              # execve, execveat
}
ARCH_NAMES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def program(arch: Arch, threads: bool) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions. Jumps name one of the three returns at the
    end ("allow", "eperm", "enosys") or 0 (the next instruction); offsets are resolved here."""
    body = [(LD_ABS_W, 0, 0, ARCH), (JEQ, 0, "eperm", arch.audit), (LD_ABS_W, 0, 0, NR)]
    if arch.x32:
        body.append((JGE, "eperm", 0, X32_SYSCALL_BIT))
    body += [(JEQ, "eperm", 0, nr) for nr in arch.denied]
    body.append((JEQ, "enosys", 0, arch.clone3))
    body.append((JEQ, 0, "allow", arch.clone))
    body.append((LD_ABS_W, 0, 0, ARG0_LOW))           # clone's flags (first argument on both)
    body.append((JSET, "eperm" if threads else "allow", "eperm", CLONE_THREAD))
    returns = {"allow": SECCOMP_RET_ALLOW, "eperm": SECCOMP_RET_ERRNO | errno.EPERM,
               "enosys": SECCOMP_RET_ERRNO | errno.ENOSYS}
    at = {name: len(body) + i for i, name in enumerate(returns)}
    out = []
    for i, (code, jt, jf, k) in enumerate(body):
        jt, jf = (at[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf))
        out.append((code, jt, jf, k))
    return out + [(RET, 0, 0, k) for k in returns.values()]


def install(threads: bool) -> str:
    """Deny processes and exec (and new threads when `threads`) to this process from now on.

    Returns the level for the report: "processes+threads", "processes", or "unavailable: why"
    (an unknown architecture, a kernel without seccomp); never raises."""
    arch = ARCHES.get(ARCH_NAMES.get(platform.machine().lower(), ""))
    if arch is None or struct.calcsize("P") != 8:
        return f"unavailable: no filter for the {platform.machine() or 'unknown'} architecture"
    insns = program(arch, threads)
    table = (_SockFilter * len(insns))(*(_SockFilter(*insn) for insn in insns))
    prog = _SockFprog(len(insns), table)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
        prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
        if prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
            return f"unavailable: PR_SET_NO_NEW_PRIVS failed ({_errno()})"
        if prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
            return f"unavailable: the kernel refused the seccomp filter ({_errno()})"
    except (OSError, AttributeError) as e:   # no libc prctl: a libc we cannot call
        return f"unavailable: {type(e).__name__}: {e}"
    return "processes+threads" if threads else "processes"


def _errno() -> str:
    code = ctypes.get_errno()
    return errno.errorcode.get(code, str(code))
