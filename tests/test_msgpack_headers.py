"""The one msgpack header table of the spec tooling, against msgspec's encoder: every first byte
it writes is read back as the kind, header size and length it is."""

from __future__ import annotations

import struct

import msgspec
import pytest

from conformance.schema.msgpack_headers import FIXEXT, FORMATS, HeaderError, markers, read_head

#: value -> (kind, header size, length) of its first item
SAMPLES = [
    (5, ("int", 1, 0)), (-5, ("int", 1, 0)), (200, ("int", 1, 1)), (70000, ("int", 1, 4)), (2**64 - 1, ("int", 1, 8)),
    (-200, ("int", 1, 2)), (-2**63, ("int", 1, 8)), (0.5, ("float64", 1, 8)), (None, ("nil", 1, 0)),
    (True, ("bool", 1, 0)), ("abc", ("str", 1, 3)), ("x" * 40, ("str", 2, 40)), ("x" * 300, ("str", 3, 300)),
    (b"ab", ("bin", 2, 2)), (b"x" * 70000, ("bin", 5, 70000)), ([1, 2], ("array", 1, 2)),
    ([0] * 20, ("array", 3, 20)), ({"a": 1}, ("map", 1, 1)), ({str(i): i for i in range(16)}, ("map", 3, 16)),
    (msgspec.msgpack.Ext(1, b"abcd"), ("ext", 2, 4)), (msgspec.msgpack.Ext(2, b"abc"), ("ext", 3, 3)),
    (msgspec.msgpack.Ext(3, b"x" * 300), ("ext", 4, 300)),
]


@pytest.mark.parametrize("value, head", SAMPLES, ids=[repr(v)[:20] for v, _ in SAMPLES])
def test_the_table_reads_what_msgspec_writes(value, head):
    assert tuple(read_head(msgspec.msgpack.encode(value), 0)) == head


def test_every_first_byte_but_c1_starts_an_item():
    for b in range(256):
        data = bytes([b]) + b"\x00" * 9
        if b == 0xC1:
            with pytest.raises(HeaderError, match="0xc1 at offset 0 is not a msgpack type"):
                read_head(data, 0)
        else:
            read_head(data, 0)
    assert set(FORMATS) | set(FIXEXT) | {0xC0, 0xC1, 0xC2, 0xC3} == set(range(0xC0, 0xE0))


def test_a_header_cut_short_is_an_error():
    for data in (b"", b"\xd9", b"\xda\x01", b"\xc7\x05", b"\xd4"):
        with pytest.raises(HeaderError, match="cut short"):
            read_head(data, 0)


def test_writer_markers_narrowest_first():
    assert markers("int", signed=False) == (0xCC, 0xCD, 0xCE, 0xCF)
    assert markers("int", signed=True) == (0xD0, 0xD1, 0xD2, 0xD3)
    assert markers("array") == (0xDC, 0xDD) and markers("str") == (0xD9, 0xDA, 0xDB)


@pytest.mark.parametrize("first", sorted(set(FORMATS) | set(FIXEXT)), ids=hex)
def test_msgspec_decodes_whole_what_the_table_says(first):
    """An item built from the table alone (its length or count in the table's width, then a body
    of the length read back): msgspec's decoder takes it whole; a wrong width runs short or
    leaves bytes over."""
    kind, fmt = FORMATS.get(first, ("ext", ""))
    sized = fmt and kind not in ("int", "float32", "float64")
    data = bytes([first]) + (struct.pack(fmt, 3) if sized else b"") + b"\x01" * 8
    head = read_head(data, 0)
    body = {"array": b"\x01", "map": b"\x01\x01"}.get(kind, b"a") * head.length
    msgspec.msgpack.decode(data[:head.size] + body)
