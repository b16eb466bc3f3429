"""Replies that cannot be forged (issue 53): an answer counts only if the worker's own serving
loop sent it, as the one frame of its request, and the loop answers the grader's follow-up.

Student code can reach the worker's channel to the grader: the socket is an open descriptor in
/proc/self/fd, and the request's tag (grader.sandbox.launcher: a fresh random tag per request,
echoed in the reply's framing) is in the serving loop's frame, where `sys._getframe()` finds it.
Each attack below finds them the way a student would and writes to the socket during its own
call; each call must fail with a status that says why, and none may pass or be quietly replaced.
The attacks are written as a hostile student would write them (os only, no import past the
allow-list), and are run through the proxy, as a check runs them.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader import errors
from grader.sandbox.proxy import Submission

ATTACKS = '''
import json
import os
import sys


def _sockets():
    """Every socket this process holds, found as a student would: /proc/self/fd and fstat."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.fstat(int(name)).st_mode & 0o170000 == 0o140000:
                found.append(int(name))
        except OSError:
            pass
    return found


def _tag():
    """The tag of the request being served: a local of the serving loop, up the stack."""
    frame = sys._getframe()
    while frame is not None:
        for name in ("tag", "seq"):
            value = frame.f_locals.get(name)
            if isinstance(value, str):
                return value
        frame = frame.f_back
    return ""


def _frame(payload):
    return len(payload).to_bytes(4, "big") + payload


def _message(value):
    """A well-formed reply, as the codec frames one: a header naming the parts and the tag."""
    body = json.dumps(value).encode()
    head = json.dumps({"parts": 1, "tag": _tag()}).encode()
    return _frame(head) + _frame(body)


FORGED = {"__dict__": [["ok", True], ["value", 42.0], ["extras", {"__dict__": []}]]}


def _write(data):
    for fd in _sockets():
        try:
            os.write(fd, data)
        except OSError:
            pass


def honest(x):
    return 1.0


def forge_then_return(x):
    """A well-formed reply with the right tag, then the call returns as usual."""
    _write(_message(FORGED))
    return 1.0


def forge_then_exit(x):
    """A well-formed reply, then the process leaves before the loop could answer anything."""
    _write(_message(FORGED))
    os._exit(0)


def garbage(x):
    """A frame that is not a message, then a normal return."""
    _write(_frame(b"this is not json"))
    return 1.0


def partial(x):
    """A frame that promises 40 bytes and carries 10: the real reply's first bytes complete it."""
    _write((40).to_bytes(4, "big") + b'{"parts": ')
    return 1.0


def hijack(x):
    """Forge the reply, then answer the grader's follow-up on the loop's behalf, and return:
    the real reply lands after the forged answer to the follow-up."""
    _write(_message(FORGED))
    for fd in _sockets():
        try:
            size = int.from_bytes(os.read(fd, 4), "big")       # the follow-up's header frame
            header = json.loads(os.read(fd, size))
            for _ in range(header["parts"]):
                os.read(fd, int.from_bytes(os.read(fd, 4), "big"))
            body = json.dumps({"__dict__": [["ok", True]]}).encode()
            head = json.dumps({"parts": 1, "tag": header.get("tag", "")}).encode()
            os.write(fd, _frame(head) + _frame(body))
        except (OSError, ValueError):
            pass
    return 1.0
'''


@pytest.fixture
def worker(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "online_softmax.py").write_text(ATTACKS)
    worker = Submission("online_softmax", sub, "cpu", tmp_path / "scratch")
    yield worker
    worker.close()


def test_an_honest_call_answers(worker):
    assert worker.call("honest", np.ones(3)).value == 1.0
    assert worker.call("honest", np.ones(3)).value == 1.0


@pytest.mark.parametrize("attack, error, words", [
    ("forge_then_return", errors.ForgedReply, "more than one"),
    ("forge_then_exit", errors.WorkerCrashed, "exited"),
    ("garbage", errors.ForgedReply, "could not be read"),
    ("partial", errors.ForgedReply, "could not be read"),
])
def test_a_forged_reply_fails_its_call(worker, attack, error, words):
    """A forged frame plus the loop's own reply is two frames for one request; a forged frame
    then an exit is a worker that died in its call; garbage or a cut frame is unreadable."""
    assert worker.call("honest", np.ones(3)).value == 1.0   # the worker is up before the attack
    with pytest.raises(error, match=words):
        worker.call(attack, np.ones(3))


def test_tampering_is_remembered(worker):
    """After a forged frame, no later call of the exercise counts: a fresh worker would run the
    same code, and the forged call's effects (what it wrote) are not undone."""
    with pytest.raises(errors.ForgedReply):
        worker.call("forge_then_return", np.ones(3))
    with pytest.raises(errors.ForgedReply, match="earlier call"):
        worker.call("honest", np.ones(3))


def test_a_hijacked_follow_up_is_caught_by_the_next_request(worker):
    """The one class the follow-up cannot close by itself: code that answers the follow-up on
    the loop's behalf (docs/SECURITY.md, "Replies"). Its real reply then arrives behind the
    forged one, as the answer to a request it does not carry the tag of: the next call at the
    latest fails, and every one after it."""
    try:
        worker.call("hijack", np.ones(3))
    except errors.ForgedReply:
        pass   # the real reply was already in the socket when the grader looked
    with pytest.raises(errors.ForgedReply):
        worker.call("honest", np.ones(3))
    with pytest.raises(errors.ForgedReply):
        worker.call("honest", np.ones(3))


def test_a_worker_that_exits_between_calls_is_not_replaced_quietly(worker):
    """A worker found dead when a call starts (no student code should run between calls: only a
    thread, or a call that answered for the loop, could have ended it) fails that call."""
    import os
    import signal

    assert worker.call("honest", np.ones(3)).value == 1.0
    os.kill(worker.worker_pid, signal.SIGKILL)
    worker._worker.proc.wait(10)
    with pytest.raises(errors.WorkerCrashed, match="between"):
        worker.call("honest", np.ones(3))
    assert worker.call("honest", np.ones(3)).value == 1.0     # the next call starts afresh
