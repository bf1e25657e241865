"""The msgpack header table, once for the spec tooling: what each first byte announces and how
long its header is. The byte-form parser and writer (wire_form.py) and the refusal corpus's
tokenizer (golden/refusals.py) read it; nothing here builds values.

A header is the first byte, then (for the sized forms) a length or count, then (for
extensions) the extension code. What follows it is the body: a number's bytes, a str's, bin's
or extension's payload, or, for arrays and maps, their items.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Optional

__all__ = ["FIXEXT", "FORMATS", "HeaderError", "Head", "NIL", "FALSE", "TRUE", "fixext_marker", "markers",
           "read_head"]

NIL, FALSE, TRUE = 0xC0, 0xC2, 0xC3

#: First byte -> (kind, struct format of what follows it): the value of a number; the length of
#: a str, bin or extension payload; the count of an array's elements or a map's pairs.
FORMATS: dict[int, tuple[str, str]] = {
    0xCA: ("float32", ">f"), 0xCB: ("float64", ">d"),
    0xCC: ("int", ">B"), 0xCD: ("int", ">H"), 0xCE: ("int", ">I"), 0xCF: ("int", ">Q"),
    0xD0: ("int", ">b"), 0xD1: ("int", ">h"), 0xD2: ("int", ">i"), 0xD3: ("int", ">q"),
    0xD9: ("str", ">B"), 0xDA: ("str", ">H"), 0xDB: ("str", ">I"),
    0xC4: ("bin", ">B"), 0xC5: ("bin", ">H"), 0xC6: ("bin", ">I"),
    0xDC: ("array", ">H"), 0xDD: ("array", ">I"),
    0xDE: ("map", ">H"), 0xDF: ("map", ">I"),
    0xC7: ("ext", ">B"), 0xC8: ("ext", ">H"), 0xC9: ("ext", ">I"),
}
#: fixext first byte -> the size of its payload (the code byte follows the first byte)
FIXEXT: dict[int, int] = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}
_NUMBERS = ("int", "float32", "float64")


class HeaderError(ValueError):
    """The byte starts no msgpack item (0xc1), or the header is cut short."""


class Head(NamedTuple):
    """One item's header. kind: nil, bool, int, float32, float64, str, bin, array, map, ext.
    size: the header's bytes (first byte, length or count, extension code). length: the body's
    bytes (a number's, a payload's; 0 for nil, bool and a fixint) or, for array and map, the
    items that follow (elements; pairs of a map)."""

    kind: str
    size: int
    length: int


def read_head(data: bytes, pos: int) -> Head:
    """The header of the item at `pos` (HeaderError when there is none)."""
    if pos >= len(data):
        raise HeaderError(f"cut short at offset {pos}")
    b = data[pos]
    if b <= 0x7F or b >= 0xE0:
        return Head("int", 1, 0)
    if b <= 0x8F:
        return Head("map", 1, b & 0x0F)
    if b <= 0x9F:
        return Head("array", 1, b & 0x0F)
    if b <= 0xBF:
        return Head("str", 1, b & 0x1F)
    if b == NIL:
        return Head("nil", 1, 0)
    if b in (FALSE, TRUE):
        return Head("bool", 1, 0)
    if b in FIXEXT:
        return _whole(data, pos, Head("ext", 2, FIXEXT[b]))
    if b not in FORMATS:
        raise HeaderError(f"byte 0x{b:02x} at offset {pos} is not a msgpack type")
    kind, fmt = FORMATS[b]
    width = struct.calcsize(fmt)
    if kind in _NUMBERS:
        return Head(kind, 1, width)
    if pos + 1 + width > len(data):
        raise HeaderError(f"cut short at offset {pos + 1}")
    length = int.from_bytes(data[pos + 1:pos + 1 + width], "big")
    return _whole(data, pos, Head(kind, 1 + width + (kind == "ext"), length))


def _whole(data: bytes, pos: int, head: Head) -> Head:
    """The head, when every byte of it is there (an extension's code byte may be missing)."""
    if pos + head.size > len(data):
        raise HeaderError(f"cut short at offset {len(data)}")
    return head


def markers(kind: str, *, signed: Optional[bool] = None) -> tuple[int, ...]:
    """The sized first bytes of a kind, narrowest first (ints: the unsigned or signed ones)."""
    found = [(struct.calcsize(fmt), b) for b, (k, fmt) in FORMATS.items()
             if k == kind and (signed is None or fmt[1].islower() == signed)]
    return tuple(b for _, b in sorted(found))


def fixext_marker(size: int) -> Optional[int]:
    """The fixext first byte for a payload of this size, or None."""
    return next((b for b, n in FIXEXT.items() if n == size), None)
