"""The one error type for anything that cannot cross the wire."""

from __future__ import annotations

from typing import Optional


class WireError(ValueError):
    """A message could not be encoded or decoded.

    The message names the transport, the struct (when known), the field path
    and the reason, e.g. ``msgpack decode: BatchTokenIDOutput.decode_ids[2]:
    Expected `array`, got `int```.
    """

    def __init__(
        self,
        transport: str,
        reason: str,
        *,
        struct: Optional[str] = None,
        path: str = "",
        direction: str = "decode",
    ) -> None:
        self.transport = transport
        self.reason = reason
        self.struct = struct
        self.path = path
        self.direction = direction
        where = (struct or "") + path
        super().__init__(f"{transport} {direction}: {where + ': ' if where else ''}{reason}")
