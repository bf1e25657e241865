"""Test-only tap on every receive path: what came off the socket, and what was handed on.

With ``tap_dir`` set, each process appends one record per received message to
``<tap_dir>/<process>.tap``: the raw ZeroMQ frames, the transport, the link
name, the type handed downstream, the paths of any PickleWrapper still inside
that object (there must be none) and, on a scheduler's link, the object itself
(pickled: what the pipeline runs compare field by field). A message the receive
path could not decode is recorded too (``delivered_type`` ``"<undecodable>"``).
Records are msgpack maps, each prefixed by its 4-byte big-endian length, flushed at
once, so a test can read them while the engine runs or after it died. Each message
a process sends is one line (the receiving process's name) of ``<process>.sent``.
Without ``tap_dir`` the tap does nothing.
"""

from __future__ import annotations

import pickle
import struct
import time
from collections import Counter
from pathlib import Path
from typing import Any, Optional, Sequence

import msgspec

from reference_impl.io_struct import PickleWrapper

_LEN = struct.Struct(">I")
UNDECODABLE = "<undecodable>"


class TapRecord(msgspec.Struct, kw_only=True):
    process: str
    link: str
    transport: str
    frames: list[bytes]
    delivered_type: str
    leftover_wrappers: list[str]
    time: float
    delivered: Optional[bytes] = None  # pickle of what was handed on (scheduler links)


class Tap:
    def __init__(self, tap_dir: Optional[str], process: str) -> None:
        self.process = process
        self._file = self._sent = None
        if tap_dir is not None:
            Path(tap_dir).mkdir(parents=True, exist_ok=True)
            self._file = open(Path(tap_dir) / f"{process}.tap", "ab")
            self._sent = open(Path(tap_dir) / f"{process}.sent", "a")
        self._keep_delivered = process.startswith("scheduler_")
        self._encode = msgspec.msgpack.Encoder().encode

    @property
    def enabled(self) -> bool:
        return self._file is not None

    def record(self, link: str, transport: str, frames: Sequence[Any], delivered: Any) -> None:
        if self._file is None:
            return
        kept = pickle.dumps(delivered, pickle.HIGHEST_PROTOCOL) if self._keep_delivered else None
        rec = TapRecord(process=self.process, link=link, transport=transport,
                        frames=[bytes(f) for f in frames], delivered_type=type(delivered).__name__,
                        leftover_wrappers=find_wrappers(delivered), time=time.time(), delivered=kept)
        self._write(rec)

    def undecodable(self, link: str, transport: str, frames: Sequence[Any]) -> None:
        """A message the receive path could not decode (it is dropped): its frames, still recorded."""
        if self._file is not None:
            self._write(TapRecord(process=self.process, link=link, transport=transport,
                                  frames=[bytes(f) for f in frames], delivered_type=UNDECODABLE,
                                  leftover_wrappers=[], time=time.time()))

    def _write(self, rec: TapRecord) -> None:
        assert self._file is not None
        data = self._encode(rec)
        self._file.write(_LEN.pack(len(data)) + data)
        self._file.flush()

    def sent(self, peer: str) -> None:
        """One message sent towards the process named peer."""
        if self._sent is not None:
            self._sent.write(peer + "\n")
            self._sent.flush()

    def close(self) -> None:
        for file in (self._file, self._sent):
            if file is not None:
                file.close()
        self._file = self._sent = None


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


def read_sent(tap_dir: Path) -> Counter[str]:
    """How many messages every process sent towards each process, by the receiving process."""
    counts: Counter[str] = Counter()
    for path in sorted(Path(tap_dir).glob("*.sent")):
        counts.update(line for line in path.read_text().splitlines() if line)
    return counts


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
