"""Thresholds and limits of the reference codec, in one place.

Thresholds choose a path (performance only: every path gives the same bytes and values).
Limits bound what decode accepts; their defaults come from the environment, read when
first used (not at import), so a bad value is a clear error naming the variable instead
of an import failure. ``configure`` sets them on the running process (tests, embedders).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Optional

# Tensors at least this large go in their own frame on the opt-in multipart path.
OOB_THRESHOLD = 1 << 20
# A tensor or ndarray at least this large is spliced into the message instead of being
# copied twice (once into its ext payload, once into msgspec's output buffer).
SPLICE_THRESHOLD = 1 << 18
# Below this many elements a List[array] goes through enc_hook one by one (cheaper than
# the copy of the struct the batched path needs).
ARRAY_LIST_MIN = 8
# Messages of a type with List[array] fields at least this long take the twin decoder (it
# pays off from about ten arrays).
FAST_DECODE_MIN = 1024

MAX_MESSAGE_BYTES_ENV = "IPC_MAX_MESSAGE_BYTES"
MAX_NESTING_ENV = "IPC_MAX_NESTING"


@dataclass(frozen=True)
class Limits:
    """What decode accepts. max_message_bytes: largest message (a multipart message: all
    frames together), None = no limit. max_nesting: deepest nesting of arrays/maps (msgpack);
    None = the bound of msgspec's C decoder (the interpreter's recursion limit, about 1000
    levels, reported as a WireError); a number makes decode pre-scan the bytes (costs time:
    for peers you do not trust). decode(..., max_bytes=, max_nesting=) override per call."""

    max_message_bytes: Optional[int] = 1 << 30
    max_nesting: Optional[int] = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> "Limits":
        """IPC_MAX_MESSAGE_BYTES (default 1 GiB) and IPC_MAX_NESTING (default none); 0 or a
        negative number: no limit. ValueError naming the variable when one is not an integer."""
        return cls(_limit(environ, MAX_MESSAGE_BYTES_ENV, cls.max_message_bytes),
                   _limit(environ, MAX_NESTING_ENV, cls.max_nesting))


def _limit(environ: Mapping[str, str], name: str, default: Optional[int]) -> Optional[int]:
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer "
                         "(a number of bytes / levels; 0 for no limit)") from None
    return value if value > 0 else None


_current: Optional[Limits] = None


def current() -> Limits:
    """The process's limits: configured, or read from the environment on first use. A bad
    value raises every time (nothing is cached until the environment reads cleanly)."""
    global _current
    if _current is None:
        _current = Limits.from_env()
    return _current


def configure(limits: Optional[Limits]) -> None:
    """Set the process's limits; None: read the environment again on next use."""
    global _current
    _current = limits
