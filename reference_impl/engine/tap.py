"""Test-only tap on every receive path: what came off the socket, and what was handed on.

With ``tap_dir`` set, each process appends one record per received message to
``<tap_dir>/<process>.tap``: the raw ZeroMQ frames, the transport, the link
name, the type handed downstream and the paths of any PickleWrapper still inside
that object (there must be none). Records are msgpack maps, each prefixed by its
4-byte big-endian length, flushed at once, so a test can read them while the
engine runs or after it died. Without ``tap_dir`` the tap does nothing.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import msgspec

from reference_impl.io_struct import PickleWrapper

_LEN = struct.Struct(">I")


class TapRecord(msgspec.Struct, kw_only=True):
    process: str
    link: str
    transport: str
    frames: list[bytes]
    delivered_type: str
    leftover_wrappers: list[str]
    time: float


class Tap:
    def __init__(self, tap_dir: Optional[str], process: str) -> None:
        self.process = process
        self._file = None
        if tap_dir is not None:
            Path(tap_dir).mkdir(parents=True, exist_ok=True)
            self._file = open(Path(tap_dir) / f"{process}.tap", "ab")
        self._encode = msgspec.msgpack.Encoder().encode

    @property
    def enabled(self) -> bool:
        return self._file is not None

    def record(self, link: str, transport: str, frames: Sequence[Any], delivered: Any) -> None:
        if self._file is None:
            return
        rec = TapRecord(process=self.process, link=link, transport=transport,
                        frames=[bytes(f) for f in frames], delivered_type=type(delivered).__name__,
                        leftover_wrappers=find_wrappers(delivered), time=time.time())
        data = self._encode(rec)
        self._file.write(_LEN.pack(len(data)) + data)
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def find_wrappers(obj: Any, path: str = "", depth: int = 0) -> list[str]:
    """Paths of every PickleWrapper anywhere under obj (any field, any container)."""
    if isinstance(obj, PickleWrapper):
        return [path or "<top>"]
    if depth > 32:
        return []
    out: list[str] = []
    if isinstance(obj, msgspec.Struct):
        for name in obj.__struct_fields__:
            out += find_wrappers(getattr(obj, name), f"{path}.{name}", depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out += find_wrappers(v, f"{path}[{i}]", depth + 1)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out += find_wrappers(v, f"{path}[{k!r}]", depth + 1)
    elif hasattr(obj, "__dataclass_fields__"):
        for name in obj.__dataclass_fields__:
            out += find_wrappers(getattr(obj, name, None), f"{path}.{name}", depth + 1)
    return out


def read_tap(tap_dir: Path) -> list[TapRecord]:
    """Every record of every process, in file order per process."""
    decoder = msgspec.msgpack.Decoder(TapRecord)
    records: list[TapRecord] = []
    for path in sorted(Path(tap_dir).glob("*.tap")):
        data = path.read_bytes()
        offset = 0
        while offset + _LEN.size <= len(data):
            (size,) = _LEN.unpack_from(data, offset)
            end = offset + _LEN.size + size
            if end > len(data):
                break  # a record cut short by a killed process
            records.append(decoder.decode(data[offset + _LEN.size:end]))
            offset = end
    return records
