"""The two transports of the wire format (SPEC §2): every struct goes over either."""

from __future__ import annotations

from typing import Literal, get_args

Transport = Literal["pickle", "msgpack"]

#: Both transports, pickle first (the reference side of a comparison).
TRANSPORTS: tuple[Transport, ...] = get_args(Transport)
