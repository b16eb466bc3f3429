"""bench_attn's reference: the simulated device, whose clock is what its timers' numbers are
judged against (the work it saw is the right answer; judging.py holds a number to it).

The worker's workload (grader.worker.workloads.AsyncWork) holds only a socket: each launch and
each synchronize is a request that this process answers when its own clock says the work is
done (`Clock`, served by a thread of the trusted process). The durations (`Stream`, drawn here,
e.g. `log_uniform` over 0.2 to 50 ms) never enter the worker's memory, and every request is
logged with this clock's timestamps (`Event`), so the grader counts the calls and bounds every
interval the student could have measured (`interval_bounds`).
"""

from __future__ import annotations

import heapq
import math
import os
import secrets
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Event:
    """One request from a workload, on the grader's clock (time.perf_counter, seconds)."""

    kind: str                     # "launch" or "sync"
    n: int                        # the N the launch was made at (sweeps), else 0
    arrival: float                # when the request reached the grader
    reply: float | None = None    # when the grader answered it (the call or the wait returned)
    done: float | None = None     # launch: when its work finished on the simulated device


@dataclass
class Stream:
    """One workload's device: its settings (drawn here) and its log."""

    blocking: bool = False        # True: a call runs its work before returning (like a CPU op)
    compile_ms: float = 0.0       # paid synchronously by the first launch
    launch_ms: float = 0.0        # paid synchronously by every launch, before its work
    ms: float | None = None       # duration of every launch; None: drawn per N in `ms_range`
    ms_range: tuple = (0.2, 50.0)
    by_n: dict = field(default_factory=dict)     # N -> ms, drawn log-uniformly on first use
    events: list = field(default_factory=list)
    busy_until: float = 0.0
    last_reply: float = 0.0

    def duration_s(self, n: int, rng) -> float:
        if self.ms is not None:
            return self.ms / 1e3
        if n not in self.by_n:
            lo, hi = self.ms_range
            self.by_n[n] = float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
        return self.by_n[n] / 1e3

    def launches(self, n: int | None = None) -> list[Event]:
        return [e for e in self.events if e.kind == "launch" and (n is None or e.n == n)]


def log_uniform(rng, lo: float, hi: float) -> float:
    """A number between lo and hi whose logarithm is uniform: 0.2 to 50 ms spans 2.4 decades."""
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def log_spread(rng, lo: float, hi: float, n: int) -> list[float]:
    """n numbers between lo and hi, one from the middle of each of n equal bands of log(lo)..
    log(hi), in a shuffled order: 0.2 to 50 ms in three gives one near 0.5 ms, one near 3 ms and
    one near 20 ms, each a factor of 2 or more from the next band, so no single number lies
    within the bounds of all of them (a constant timer fails every draw, not two in three)."""
    width = (math.log(hi) - math.log(lo)) / n
    picks = [math.log(lo) + width * (k + rng.uniform(0.2, 0.8)) for k in range(n)]
    order = rng.permutation(n)
    return [float(math.exp(picks[k])) for k in order]


NAP_S = 2e-4   # how late a reply or a request's arrival may be seen, near a reply's due time


class Clock:
    """A socket in the worker's scratch folder, served by a thread of this process.

        with Clock(sub.scratch, {"fn": Stream(ms=12.3, compile_ms=40)}, rng) as clock:
            fn = Trusted("async_work", key="w", params=clock.params("fn"))
            result = sub.call("time_proper", fn, ...)
        clock.streams["fn"].events        # every launch and sync, timestamped here

    Requests ("L <n>" launch, "S" synchronize, one line each) are answered with one byte when
    the simulated device says so: a launch at once (the first after `compile_ms`), or, when the
    stream is blocking, after its work; a synchronize when every launch before it has finished.
    Each connection names its stream first; a second connection to a stream is refused, so the
    log holds exactly what the workload object asked for.
    """

    def __init__(self, directory, streams: dict[str, Stream], rng):
        self.streams = streams
        self.rng = rng
        self.name = f"clock-{secrets.token_hex(6)}.sock"
        self.path = Path(directory) / self.name
        self.started = self.stopped = 0.0
        self._sel = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._pending: list = []        # heap of (reply_at, seq, conn, event)
        self._seq = 0
        self._claimed: set = set()
        self._thread = None
        self._listener = None

    def params(self, stream: str) -> dict:
        """What the worker-side workload needs: where to connect, and which stream it is."""
        return {"socket": self.name, "stream": stream}

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self):
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(_bindable(self.path))
        os.chmod(self.path, 0o666)            # the sandboxed worker may run as another user
        self._listener.listen(8)
        self._listener.setblocking(False)
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._serve, name="bench-clock", daemon=True)
        self._thread.start()
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.stopped = time.perf_counter()
        self._stop.set()
        self._thread.join(5)
        for key in list(self._sel.get_map().values()):
            key.fileobj.close()
        self._sel.close()
        self.path.unlink(missing_ok=True)
        return False

    # ------------------------------------------------------------------ the server

    def _serve(self) -> None:
        buffers: dict = {}
        while not self._stop.is_set():
            now = time.perf_counter()
            while self._pending and self._pending[0][0] <= now:
                _, _, conn, event = heapq.heappop(self._pending)
                event.reply = time.perf_counter()     # before sending: no one can see it earlier
                try:
                    conn.sendall(b".")
                except OSError:
                    pass
            wait = 0.05 if not self._pending else max(0.0, self._pending[0][0] - time.perf_counter())
            # epoll waits whole milliseconds, rounded up: a reply due within 2 ms is waited for
            # in naps of NAP_S between looks at the sockets, so it leaves at most that late
            near = wait < 0.002
            for key, _ in self._sel.select(timeout=0 if near else min(wait - 0.001, 0.05)):
                if key.data is None:
                    self._accept()
                    continue
                conn = key.fileobj
                try:
                    data = conn.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    self._sel.unregister(conn)
                    conn.close()
                    continue
                arrival = time.perf_counter()
                buf = buffers.get(conn, b"") + data
                *lines, buffers[conn] = buf.split(b"\n")
                for line in lines:
                    if not self._request(conn, key, line.decode(errors="replace").strip(), arrival):
                        break
            if near and self._pending:
                time.sleep(min(wait, NAP_S))

    def _accept(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        conn.setblocking(True)
        self._sel.register(conn, selectors.EVENT_READ, {"stream": None})

    def _request(self, conn, key, line: str, arrival: float) -> bool:
        """Log and schedule one request; False when the connection was refused and closed."""
        state = key.data
        if state["stream"] is None:           # the first line names the stream
            name = line.removeprefix("H ").strip()
            if name not in self.streams or name in self._claimed:
                self._sel.unregister(conn)
                conn.close()
                return False
            self._claimed.add(name)
            state["stream"] = name
            return True
        s = self.streams[state["stream"]]
        start = max(arrival, s.last_reply)    # requests of one connection are answered in order
        if line.startswith("L"):
            parts = line.split()
            n = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            first = not s.launches()
            ready = start + (s.compile_ms / 1e3 if first else 0.0) + s.launch_ms / 1e3
            work = s.duration_s(n, self.rng)
            if s.blocking:
                done = ready + work
                reply_at = done
            else:
                done = max(ready, s.busy_until) + work
                reply_at = ready
            s.busy_until = max(s.busy_until, done)
            event = Event("launch", n, arrival, done=done)
        elif line == "S":
            reply_at = max(start, s.busy_until)
            event = Event("sync", 0, arrival)
        else:
            return True
        s.events.append(event)
        s.last_reply = reply_at
        self._seq += 1
        heapq.heappush(self._pending, (reply_at, self._seq, conn, event))
        return True


def _bindable(path: Path) -> str:
    """A path bind() accepts: AF_UNIX paths are limited to 107 bytes; a long one goes through
    the folder's /proc/self/fd link."""
    text = str(path)
    if len(text.encode()) < 100:
        return text
    fd = os.open(path.parent, os.O_RDONLY)
    return f"/proc/self/fd/{fd}/{path.name}"


# ------------------------------------------------------------------ what the log proves


def interval_bounds(events: list[Event], launch: Event, start: float, end: float,
                    waited: bool) -> tuple[float, float | None]:
    """The shortest and longest interval a timer around `launch` could have measured.

    The student's clock starts after the last request before the launch was answered (or the
    call began) and stops before the next request arrives (or the call ended). `waited`: the
    clock stops after a synchronize that covered this launch; then the interval also spans the
    work. Returns (low, high); high is None when `waited` but no synchronize covered it.
    """
    before = [start] + [t for e in events for t in (e.arrival, e.reply)
                        if t is not None and t <= launch.arrival and e is not launch]
    opened = max(before)
    if waited:
        cover = next((e for e in events if e.kind == "sync" and e.arrival >= launch.arrival
                      and e.reply is not None and e.reply >= launch.done - 1e-9), None)
        if cover is None:
            return launch.done - launch.arrival, None
        closed_after = cover.reply
        low = launch.done - launch.arrival
    else:
        closed_after = launch.reply if launch.reply is not None else launch.arrival
        low = closed_after - launch.arrival
    after = [end] + [e.arrival for e in events if e.arrival >= closed_after and e is not launch]
    return low, min(after) - opened


def work_seen(events: list[Event], launch: Event, waited: bool) -> float | None:
    """How long `launch` took on the grader's clock, idle time left out: what a timer around it
    measures, less only its own overhead. Unwaited (the call returned when the launch was
    answered: a blocking stream, or a timer that does not synchronise): from its arrival to its
    reply. Waited: to the reply of the first synchronize that covered its work, less any time
    that synchronize arrived after the work was done (a pause between the call and the
    synchronize is not the work's). None when no synchronize covered it.

    Unlike `interval_bounds`' high, this cannot be widened by pausing around the call: a number
    that was never measured, padded with sleeps until some interval could hold it, still does
    not follow the work the grader drew."""
    if not waited:
        return None if launch.reply is None else launch.reply - launch.arrival
    cover = next((e for e in events if e.kind == "sync" and e.arrival >= launch.arrival
                  and e.reply is not None and e.reply >= launch.done - 1e-9), None)
    if cover is None:
        return None
    return cover.reply - launch.arrival - max(0.0, cover.arrival - launch.done)
