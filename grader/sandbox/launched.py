"""A worker once started (`Launched`, made by grader.sandbox.launcher.launch): how the grader talks
to it, reads what it printed and stops it.

Every request has a deadline: a watchdog kills the worker and closes the pipe when it passes (on
the CPU modes counted in the worker's own CPU seconds, `cpu_seconds`). A reply counts only as
the one message the serving loop sent for the request (`Forged` otherwise). What the student
prints is read from the capture file as a bounded head and tail. `kill` takes every process the
worker started with it, and the last user-level worker to go reaps the student's uid.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import threading
import time
from multiprocessing.connection import Connection

from grader.sandbox import isolation, user_level
from grader.sandbox.allow_list import interpreter
from grader.wire import codec, framing

WALL_MULT = 3.0                 # a CPU-clocked call is stopped at this many times its limit of wall time
CAPTURE_KEEP = 64 << 10         # bytes of the capture file read from its start and from its end
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")   # the unit of /proc/<pid>/stat's CPU times
_USER_WORKERS: set = set()   # user-level workers not yet killed: the last one reaps the uid


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system, every thread) the process has used, from /proc; None when it
    is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()   # after the command name: field 3 on
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS   # utime, stime


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


class Forged(Exception):
    """A message on the worker's socket that its serving loop did not send for the request."""


class Launched:
    """A running worker: its process (the Popen that launcher.launch started; nothing here starts
    one), its pipe, its capture file."""

    def __init__(self, proc, conn: Connection, sock: socket.socket,
                 capture_fd: int, level: isolation.Level, cgroup=None):
        self.proc = proc
        self.cgroup = cgroup
        self.conn = conn
        self._sock = sock            # the same socket as conn, to shut it down from the watchdog
        self.capture_fd = capture_fd
        self.level = level
        self._pid: int | None = None
        self.replied = 0.0           # time.perf_counter() when the last reply came
        if level.name == "user":
            _USER_WORKERS.add(id(self))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def worker_pid(self) -> int:
        """Host PID of the process running student code: under `unshare --fork` the child of
        unshare (PID 1 of its namespace), else the process itself."""
        if self._pid is None:
            self._pid = self.proc.pid
            if self.level.unshare:
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline:
                    children = _children(self.proc.pid)
                    if children:
                        self._pid = children[0]
                        break
                    time.sleep(0.002)
        return self._pid

    def request(self, msg: dict, timeout: float, cpu_clock: bool = False):
        """Send `msg`, return the decoded reply. TimeoutError when the whole reply (header and
        every part) has not arrived within `timeout`: the watchdog has then killed the worker.
        With `cpu_clock`, `timeout` counts the worker's own CPU seconds (every thread), so a
        call starved by other work on a busy machine is not stopped for the machine's load; it
        is stopped anyway after WALL_MULT times `timeout` of wall time (a call that sleeps).

        A reply counts only as the one message the serving loop sent for this request: it must
        carry the request's fresh tag, and the worker must then answer a ping (a tag of its
        own) with the very next message, and leave nothing behind it. Student code can reach
        the socket and read the tags, so a frame it writes during its call is either read as
        the reply, and then the loop's own reply comes where the ping's answer should
        (Forged), or it is followed by an exit, and the ping finds the worker gone (EOFError);
        bytes that are no message raise CodecError. `replied`: the clock when the reply came."""
        fired, answered = threading.Event(), threading.Event()

        def watch():
            start = time.monotonic()
            cpu0 = cpu_seconds(self.worker_pid()) if cpu_clock else None
            wait = timeout
            while not answered.wait(wait):
                cpu = cpu_seconds(self.worker_pid()) if cpu0 is not None else None
                left_wall = WALL_MULT * timeout - (time.monotonic() - start)
                if cpu is None or cpu - cpu0 >= timeout or left_wall <= 0:
                    break
                wait = max(min(timeout - (cpu - cpu0), left_wall), 0.05)
            else:
                return
            fired.set()
            self.kill()
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        watchdog = threading.Thread(target=watch, daemon=True)
        watchdog.start()
        try:
            reply = self._exchange(msg, "the reply")
            self.replied = time.perf_counter()
            pong = self._exchange({"op": "ping"}, "the answer to the ping after it")
            if not (isinstance(pong, dict) and pong.get("ok")):
                raise Forged("the message after the reply was not the serving loop's answer to "
                             "the ping that followed it")
            self._nothing_after()
        except (EOFError, OSError, codec.CodecError):
            if fired.is_set():
                raise TimeoutError from None
            raise
        finally:
            answered.set()
        if fired.is_set():
            raise TimeoutError
        return reply

    def _exchange(self, msg: dict, what: str):
        """Send `msg` under a fresh tag; the next message must carry it."""
        tag = secrets.token_hex(8)
        framing.send(self.conn, msg, tag=tag)
        got, parts = framing.receive(self.conn)
        if got != tag:
            raise Forged(f"more than one message came for one request: {what} did not "
                         f"carry its request's tag")
        return codec.decode(parts)

    def _nothing_after(self) -> None:
        """After the ping's answer the serving loop waits for the next request: nothing more may
        be in the socket. EOFError when the worker is gone (it exited after answering)."""
        try:
            data = self._sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        if not data:
            raise EOFError
        raise Forged("bytes came after the answer to the ping that followed the reply")

    def truncate_capture(self) -> None:
        os.ftruncate(self.capture_fd, 0)

    def read_capture(self) -> str:
        """What the worker printed since the last truncate: its first and last CAPTURE_KEEP
        bytes, whatever the file's size (printing 2 GiB costs the grader 128 KiB)."""
        try:
            size = os.fstat(self.capture_fd).st_size
            if size <= 2 * CAPTURE_KEEP:
                data = os.pread(self.capture_fd, size, 0)
                return data.decode(errors="replace")
            head = os.pread(self.capture_fd, CAPTURE_KEEP, 0).decode(errors="replace")
            tail = os.pread(self.capture_fd, CAPTURE_KEEP, size - CAPTURE_KEEP).decode(errors="replace")
        except (OSError, ValueError):
            return ""
        return f"{head}\n... [{size - 2 * CAPTURE_KEEP} bytes cut] ...\n{tail}"

    def stop(self, wait_s: float) -> int | None:
        """Ask the worker to exit, wait up to wait_s, then kill it. Its exit status."""
        if self.alive():
            try:
                framing.send(self.conn, {"op": "exit"})
            except (OSError, ValueError):
                pass
            try:
                self.proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                pass
        code = self.proc.poll()
        self.kill()
        return code

    def kill(self) -> None:
        """SIGKILL the worker and everything it started: the PID namespace's init (all of its
        processes die with it), else the worker's process group."""
        proc = self.proc
        if self.level.unshare and self._pid is None and proc.poll() is None:
            self.worker_pid()
        for target in ([self._pid] if self.level.unshare and self._pid else []):
            try:
                os.kill(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)   # the worker (or unshare) leads its own group
            except (ProcessLookupError, PermissionError):
                proc.kill()
        # unshare is reaped only once every process of the namespace is gone (a thousand forked
        # processes take a few seconds): the report is written after that
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            pass
        _USER_WORKERS.discard(id(self))
        if self.level.name == "user" and not _USER_WORKERS:
            user_level.reap(interpreter(), self.level.uid)   # the machine's /tmp is shared, a PID namespace rare

    def close_files(self, keep_capture: bool = False) -> None:
        if self.cgroup is not None and self.proc.poll() is not None:
            self.cgroup.remove()
            self.cgroup = None   # one that could not be removed yet stays (empty) until reboot
        for f in (self.conn, self._sock):
            try:
                f.close()
            except OSError:
                pass
        if not keep_capture and self.capture_fd >= 0:
            os.close(self.capture_fd)
            self.capture_fd = -1

    def __del__(self):
        if getattr(self, "capture_fd", -1) >= 0:
            try:
                os.close(self.capture_fd)
            except OSError:
                pass

