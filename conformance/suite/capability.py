"""Skip a check up front when the implementation lacks an optional capability it needs."""

from __future__ import annotations

from typing import Any

import pytest

_WHAT = {
    "unwrap": "the trusted receive path that opens PickleWrappers",
    "receive": "the receive path for an untrusted peer",
    "http": "HTTP JSON validation",
    "define": "defining a message subclass after start-up",
    "socket": "ZeroMQ send/receive (a testee needs 'unwrap' for it)",
    "pickle": "the pickle transport",
    "msgpack": "the msgpack transport",
}


def require(ipc: Any, *needed: str) -> None:
    """Skip the running check, before it sends anything, unless the adapter supports every
    capability or transport in `needed` (a testee's come from its handshake)."""
    missing = [what for what in needed if not ipc.adapter.supports(what)]
    if missing:
        names = ", ".join(f"'{what}' ({_WHAT.get(what, what)})" for what in missing)
        pytest.skip(f"{ipc.adapter.label} does not offer {names}")
