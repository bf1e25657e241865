"""Reproduce one testee request outside the suite.

When a request to a testee fails, the runner saves the request frame in a file and names
it in the failure message, with the command that replays it on its own:

    ipc-conformance testee replay /tmp/ipc-conformance-replay/decode-AbortReq-msgpack-1a2b3c4d.frame \\
        --impl "cmd:./my-testee"

The replay starts the testee, does the handshake, sends that one request and prints the
answer: the result, its message, the payload bytes and what the reference decodes from them.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from conformance.errors import UsageError
from conformance.testee import protocol

__all__ = ["describe_request", "replay", "replay_dir", "save_request"]

#: What each request asks of the testee: the step named in failure messages.
STEPS = {
    "encode": "the testee's encode of a value the runner sent as a JSON view",
    "decode": "the testee's decode (and re-encode) of bytes the runner sent",
    "receive": "the testee's receive path for an untrusted peer, on bytes the runner sent",
    "unwrap": "the testee's trusted receive path (unwrap), on bytes the runner sent",
    "http": "the testee's HTTP JSON validation",
    "define": "the testee defining a message subclass after start-up",
}


def replay_dir() -> Path:
    """Where failing requests are saved: $IPC_TESTEE_REPLAY_DIR, else a folder in the temp dir."""
    return Path(os.environ.get("IPC_TESTEE_REPLAY_DIR") or Path(tempfile.gettempdir()) / "ipc-conformance-replay")


def save_request(request: dict[str, Any]) -> Optional[Path]:
    """Write one request frame (its id left out) to replay_dir(); None when it cannot be written.
    The name is made of the op, struct, transport and a digest, so a rerun reuses the file."""
    message = {k: v for k, v in request.items() if k != "id"}
    frame = protocol.pack(message)
    parts = [str(message.get(k)) for k in ("type", "struct", "transport") if message.get(k)]
    name = "-".join(parts + [hashlib.sha256(frame).hexdigest()[:8]]) + ".frame"
    path = replay_dir() / "".join(c if c.isalnum() or c in "-._" else "_" for c in name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(frame)
    except OSError:
        return None
    return path


def _short(data: Any, limit: int = 32) -> str:
    if isinstance(data, (bytes, bytearray)):
        head = bytes(data[:limit]).hex(" ")
        return f"{len(data)} bytes {head}{' ...' if len(data) > limit else ''}"
    text = str(data)
    return repr(text if len(text) <= 120 else text[:120] + "...")


def describe_request(request: dict[str, Any]) -> str:
    """One line: op, struct, transport and a short form of the input."""
    fields = [str(request.get("type"))]
    fields += [f"{key}={request[key]}" for key in ("struct", "transport", "name", "base") if request.get(key)]
    for key in ("payload", "view", "json"):
        if key in request:
            fields.append(f"{key}={_short(request[key])}")
    return " ".join(fields)


def reproducer(request: dict[str, Any], argv: Sequence[str]) -> str:
    """The command line that replays `request` against the same testee command."""
    path = save_request(request)
    if path is None:
        return "(the request could not be saved: set IPC_TESTEE_REPLAY_DIR to a writable folder)"
    return f"ipc-conformance testee replay {shlex.quote(str(path))} --impl {shlex.quote('cmd:' + shlex.join(argv))}"


def replay(path: Path, impl: str, out: Callable[[str], None] = print) -> int:
    """Send the saved request to a fresh testee and print its answer; 0 when it answered
    `payload` and the reference decodes the payload, 1 otherwise."""
    from conformance.testee.adapter import SubprocessAdapter, TesteeRuntimeError

    try:
        request = protocol.check_request(protocol.unpack(Path(path).read_bytes()[4:]), saved=True)
    except OSError as exc:
        raise UsageError(f"cannot read the saved request {str(path)!r}: {exc.strerror}") from None
    except protocol.ProtocolError as exc:
        raise UsageError(f"{str(path)!r} is not a saved request frame: {exc}") from None
    op = str(request.get("type"))
    out(f"request: {describe_request(request)}")
    out(f"step:    {STEPS.get(op, op)}")
    try:
        adapter = SubprocessAdapter(impl.removeprefix("cmd:"))
    except TesteeRuntimeError as exc:
        out(f"start failed: {exc}")
        return 1
    try:
        answer = adapter.exchange(request)
    except TesteeRuntimeError as exc:
        out(f"answer:  none ({exc})")
        return 1
    finally:
        adapter.close()
    out(f"result:  {answer['result']}")
    if answer["result"] != "payload":
        out(f"message: {answer.get('message', '')}")
        return 1
    payload = bytes(answer["payload"])
    out(f"payload: {_short(payload, 64)}")
    if op in ("decode", "encode", "receive", "http"):
        return _show_decoded(adapter, payload, str(request.get("transport", "msgpack")), out)
    return 0


def _show_decoded(adapter: Any, payload: bytes, transport: str, out: Callable[[str], None]) -> int:
    from conformance.schema.golden.view import dumps, to_view

    try:
        value = adapter.local_decode(payload, transport)
    except Exception as exc:  # noqa: BLE001 - whatever the reference says about the testee's bytes
        out(f"reference decode of the payload: refused: {exc}")
        return 1
    try:
        text = dumps(to_view(value))
    except Exception:  # noqa: BLE001 - a value without a JSON view: show its repr
        text = repr(value)
    text = text.rstrip("\n")
    out(f"reference decode of the payload: {text if len(text) <= 2000 else text[:2000] + ' ...'}")
    return 0
