"""Skip a check up front when the implementation does not declare a capability it needs.

The contract (docs/third-party.md, "Capabilities"): a check calls ``require`` before it does
any work; a capability that is not declared skips the check, naming it; once declared, any
exception the implementation raises inside the operation is a failure, never a skip."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.adapters.base import CAPABILITIES

_TRANSPORTS = {"pickle": "the pickle transport", "msgpack": "the msgpack transport"}


def require(ipc: Any, *needed: str) -> None:
    """Skip the running check, before it sends anything, unless the adapter supports every
    capability or transport in `needed` (a testee's come from its handshake)."""
    unknown = [what for what in needed if what not in CAPABILITIES and what not in _TRANSPORTS]
    if unknown:
        raise ValueError(f"the suite asks for {unknown}, which are not in the capability vocabulary")
    missing = [what for what in needed if not ipc.adapter.supports(what)]
    if missing:
        names = ", ".join(f"'{what}' ({CAPABILITIES.get(what) or _TRANSPORTS[what]})" for what in missing)
        pytest.skip(f"{ipc.adapter.label} does not offer {names}")
