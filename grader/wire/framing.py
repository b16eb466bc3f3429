"""Messages over the pipe between the grader and a worker: a framing header {"parts": n, "tag"},
then n parts, the first the JSON of grader.wire.codec's encoding and the rest its raw buffers.
Both sides use it: the worker's serving loop (grader.worker.worker) and the grader's
`Launched.request` (grader.sandbox.launched), which checks the tags."""

from __future__ import annotations

import json
from typing import Any

from grader.wire.codec import MAX_HEADER_BYTES, MAX_MESSAGE_BYTES, CodecError, decode, encode


def send(conn, value: Any, markers: bool = True, tag: str = "") -> None:
    """One message: a framing header {"parts": n, "tag": tag}, then its n parts. `tag` names the
    request a reply answers (grader.sandbox.launched), in the framing, so that a reply to a
    request the worker could not decode names it too."""
    parts = encode(value, markers)   # whole message encoded first: a CodecError sends nothing
    conn.send_bytes(json.dumps({"parts": len(parts), "tag": tag}).encode())
    for p in parts:
        conn.send_bytes(p)


def recv(conn, build=None, max_bytes: int = MAX_MESSAGE_BYTES) -> Any:
    """One message, decoded (its tag unread)."""
    return decode(receive(conn, max_bytes)[1], build)


def receive(conn, max_bytes: int = MAX_MESSAGE_BYTES) -> tuple[str, list[bytes]]:
    """One message's tag and its parts, not decoded. The caller bounds the time (the launcher's
    watchdog closes the pipe); this bounds the size: a header, part or message larger than the
    limits raises CodecError."""
    try:
        head = json.loads(conn.recv_bytes(1 << 12).decode())
        n, tag = int(head["parts"]), head.get("tag", "")
    except OSError as e:
        if "bad message length" in str(e):
            raise CodecError("a message header larger than allowed") from None
        raise
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError,
            RecursionError) as e:
        raise CodecError(f"unreadable message: {e}") from None
    if not 1 <= n <= 1 << 16:
        raise CodecError("bad part count")
    parts, left = [], max_bytes
    for i in range(n):
        try:
            part = conn.recv_bytes(max(1, min(left, MAX_HEADER_BYTES if i == 0 else left)))
        except OSError as e:
            if "bad message length" in str(e):
                raise CodecError(f"a message larger than {max_bytes >> 20} MiB") from None
            raise
        left -= len(part)
        parts.append(part)
    return (tag if type(tag) is str else ""), parts
