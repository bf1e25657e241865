"""A msgpack structure walker for the error path: where exactly is a message broken?

msgspec decodes in C and, for some failures, says what but not where: input cut short,
invalid UTF-8, bytes after the message, nesting too deep, and errors raised by extension
hooks carry no field path. ``scan`` walks the raw bytes without building values
(iteratively: any depth) and reports the first structural problem with the positional
path of the element it sits in, the message's tag, and - on request - every extension
value with its path, so the codec can re-run its hooks one by one to find the culprit.

It is only called after a decode failed (or, opt-in, to enforce a nesting limit before
decoding), so it favours clarity over speed; ``max_items`` bounds its work.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Optional, Union

Step = Union[int, str]  # an array index, or the repr of a map key ("..." while reading the key itself)

_U16, _U32, _U64 = struct.Struct(">H"), struct.Struct(">I"), struct.Struct(">Q")
_FIXEXT = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}
_SCALAR = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2,
           0xD2: 4, 0xD3: 8}


@dataclass
class Problem:
    kind: str  # "truncated" | "invalid-byte" | "utf8" | "depth" | "trailing"
    path: list[Step]
    offset: int
    detail: str = ""


@dataclass
class Scan:
    problem: Optional[Problem] = None
    tag: Optional[str] = None  # the first item of a top-level array, when it is a str
    depth: int = 0  # the deepest nesting seen
    exts: list[tuple[list[Step], int, memoryview]] = field(default_factory=list)
    complete: bool = True  # False when max_items stopped the walk early


class _Frame:
    __slots__ = ("is_map", "left", "index", "key")

    def __init__(self, is_map: bool, count: int) -> None:
        self.is_map, self.left, self.index, self.key = is_map, count * (2 if is_map else 1), 0, "..."


def _path(stack: list[_Frame]) -> list[Step]:
    out: list[Step] = []
    for f in stack:
        if f.is_map:
            out.append("..." if f.index % 2 == 0 else f.key)
        else:
            out.append(f.index)
    return out


def scan(data: Union[bytes, bytearray, memoryview], *, max_depth: Optional[int] = None, collect_exts: bool = False,
         check_utf8: bool = True, max_items: int = 2_000_000) -> Scan:
    """Walk one msgpack object (and check nothing follows it)."""
    mv = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
    n, pos = len(mv), 0
    stack: list[_Frame] = []
    out = Scan()
    items = 0

    def fail(kind: str, at: int, detail: str = "") -> Scan:
        out.problem = Problem(kind, _path(stack), at, detail)
        return out

    while True:
        items += 1
        if items > max_items:
            out.complete = False
            return out
        if pos >= n:
            return fail("truncated", pos, "the input ends before this value")
        start = pos
        b = mv[pos]
        pos += 1
        container: Optional[tuple[bool, int]] = None
        text: Optional[bytes] = None
        if b <= 0x7F or b >= 0xE0:
            size = 0
        elif 0x80 <= b <= 0x8F:
            container = (True, b & 0x0F)
            size = 0
        elif 0x90 <= b <= 0x9F:
            container = (False, b & 0x0F)
            size = 0
        elif 0xA0 <= b <= 0xBF:
            size = b & 0x1F
            text = b""
        elif b in _SCALAR:
            size = _SCALAR[b]
        elif b in (0xC4, 0xC5, 0xC6, 0xD9, 0xDA, 0xDB):
            width = {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4}[b]
            if pos + width > n:
                return fail("truncated", pos, "the input ends inside a length")
            size = int.from_bytes(mv[pos:pos + width], "big")
            pos += width
            if b >= 0xD9:
                text = b""
        elif b in (0xC7, 0xC8, 0xC9) or b in _FIXEXT:
            if b in _FIXEXT:
                size = _FIXEXT[b]
            else:
                width = {0xC7: 1, 0xC8: 2, 0xC9: 4}[b]
                if pos + width > n:
                    return fail("truncated", pos, "the input ends inside an extension length")
                size = int.from_bytes(mv[pos:pos + width], "big")
                pos += width
            if pos + 1 > n:
                return fail("truncated", pos, "the input ends before the extension type")
            code = int.from_bytes(mv[pos:pos + 1], "big", signed=True)
            pos += 1
            if pos + size > n:
                return fail("truncated", pos, f"an extension of {size} bytes, {n - pos} left")
            if collect_exts:
                out.exts.append((_path(stack), code, mv[pos:pos + size]))
        elif b in (0xDC, 0xDD, 0xDE, 0xDF):
            width = 2 if b in (0xDC, 0xDE) else 4
            if pos + width > n:
                return fail("truncated", pos, "the input ends inside a container length")
            container = (b >= 0xDE, int.from_bytes(mv[pos:pos + width], "big"))
            pos += width
            size = 0
        else:  # 0xC1: never used
            return fail("invalid-byte", start, f"byte 0x{b:02x} is not valid msgpack")
        if pos + size > n:
            return fail("truncated", pos, f"a value of {size} bytes, {n - pos} left")
        if text is not None:
            raw = bytes(mv[pos:pos + size])
            if check_utf8:
                try:
                    decoded = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    return fail("utf8", pos, f"invalid UTF-8 at byte {exc.start} of the string")
            else:
                decoded = raw.decode("utf-8", "replace")
            if len(stack) == 1 and not stack[0].is_map and stack[0].index == 0 and out.tag is None:
                out.tag = decoded
            if stack and stack[-1].is_map and stack[-1].index % 2 == 0:
                stack[-1].key = repr(decoded)
        elif stack and stack[-1].is_map and stack[-1].index % 2 == 0:
            stack[-1].key = "..."  # a non-str key: shown as msgspec does
        pos += size
        if container is not None and container[1] > 0:
            if max_depth is not None and len(stack) + 1 > max_depth:
                return fail("depth", start, f"nesting deeper than {max_depth} levels")
            stack.append(_Frame(*container))
            out.depth = max(out.depth, len(stack))
            continue
        # one value complete: advance the enclosing containers
        while stack:
            top = stack[-1]
            top.left -= 1
            top.index += 1
            if top.left > 0:
                break
            stack.pop()
        if not stack:
            if pos < n:
                out.problem = Problem("trailing", [], pos, f"{n - pos} bytes after the message (byte {pos})")
            return out


def render(path: list[Step], limit: int = 12) -> str:
    """msgspec's positional notation without the `$`: [3][0]['key'][...]; long paths elided."""
    steps = [f"[{s}]" for s in path]
    if len(steps) > limit:
        steps = steps[:limit - 2] + [f"...({len(steps) - limit + 1} more levels)..."] + steps[-1:]
    return "".join(steps)
