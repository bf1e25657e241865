"""A small msgpack writer for mutants and the acceptance checks: it writes what the
reference encoder never does (float 32, wide ints).

The reference encoder's bytes are decoded untyped (msgspec: extensions stay ``Ext``),
changed by a mutant, and written back here. With no change the bytes are the reference's
(shortest forms, float 64); ``Float32`` forces the float 32 form a careless encoder uses.
"""

from __future__ import annotations

import struct
from typing import Any, Callable

import msgspec


class Float32(float):
    """A float the writer puts on the wire as float 32 (0xca)."""


class MapPairs(list):
    """A map given as (key, value) pairs: the writer keeps duplicate keys (what a careless
    encoder in another language can send)."""


class WideInt(int):
    """An int the writer puts on the wire in its 64-bit form (0xd3 signed, 0xcf unsigned)."""


def _sized(out: bytearray, n: int, fix: tuple[int, int] | None, markers: tuple[int, int, int]) -> None:
    if fix is not None and n < fix[1]:
        out.append(fix[0] | n)
    elif n < 1 << 8 and markers[0]:
        out += bytes((markers[0], n))
    elif n < 1 << 16:
        out.append(markers[1])
        out += struct.pack(">H", n)
    else:
        out.append(markers[2])
        out += struct.pack(">I", n)


def _int(out: bytearray, v: int) -> None:
    if 0 <= v < 128:
        out.append(v)
    elif -32 <= v < 0:
        out += struct.pack(">b", v)
    elif v >= 0:
        for marker, fmt, bound in ((0xCC, ">B", 1 << 8), (0xCD, ">H", 1 << 16), (0xCE, ">I", 1 << 32),
                                   (0xCF, ">Q", 1 << 64)):
            if v < bound:
                out.append(marker)
                out += struct.pack(fmt, v)
                return
        raise OverflowError(v)
    else:
        for marker, fmt, bound in ((0xD0, ">b", 1 << 7), (0xD1, ">h", 1 << 15), (0xD2, ">i", 1 << 31),
                                   (0xD3, ">q", 1 << 63)):
            if v >= -bound:
                out.append(marker)
                out += struct.pack(fmt, v)
                return
        raise OverflowError(v)


def _ext(out: bytearray, code: int, data: bytes) -> None:
    fixed = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}
    if len(data) in fixed:
        out.append(fixed[len(data)])
    else:
        _sized(out, len(data), None, (0xC7, 0xC8, 0xC9))
    out += struct.pack(">b", code) + data


def write(value: Any, out: bytearray | None = None) -> bytes:
    out = bytearray() if out is None else out
    if value is None:
        out.append(0xC0)
    elif value is True or value is False:
        out.append(0xC3 if value else 0xC2)
    elif isinstance(value, WideInt):
        out.append(0xCF if value >= 0 else 0xD3)
        out += struct.pack(">Q" if value >= 0 else ">q", value)
    elif isinstance(value, int):
        _int(out, value)
    elif isinstance(value, Float32):
        out.append(0xCA)
        out += struct.pack(">f", value)
    elif isinstance(value, float):
        out.append(0xCB)
        out += struct.pack(">d", value)
    elif isinstance(value, str):
        raw = value.encode("utf-8", "surrogatepass")
        _sized(out, len(raw), (0xA0, 32), (0xD9, 0xDA, 0xDB))
        out += raw
    elif isinstance(value, (bytes, bytearray, memoryview)):
        _sized(out, len(value), None, (0xC4, 0xC5, 0xC6))
        out += bytes(value)
    elif isinstance(value, MapPairs):
        _sized(out, len(value), (0x80, 16), (0, 0xDE, 0xDF))
        for k, v in value:
            write(k, out)
            write(v, out)
    elif isinstance(value, (list, tuple)):
        _sized(out, len(value), (0x90, 16), (0, 0xDC, 0xDD))
        for item in value:
            write(item, out)
    elif isinstance(value, dict):
        _sized(out, len(value), (0x80, 16), (0, 0xDE, 0xDF))
        for k, v in value.items():
            write(k, out)
            write(v, out)
    elif isinstance(value, msgspec.msgpack.Ext):
        _ext(out, value.code, bytes(value.data))
    else:
        raise TypeError(f"no msgpack form for {type(value).__name__}")
    return bytes(out)


def read(data: bytes) -> Any:
    """Untyped decode: arrays are lists, maps dicts, extensions ``Ext``."""
    return msgspec.msgpack.decode(data)


def rewrite(value: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply fn bottom-up to every node (map keys included)."""
    if isinstance(value, list):
        value = [rewrite(v, fn) for v in value]
    elif isinstance(value, dict):
        value = {rewrite(k, fn): rewrite(v, fn) for k, v in value.items()}
    return fn(value)
