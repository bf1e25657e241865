"""The manifest's type-expression language: parse, render, and build from Python types.

Grammar (documented normatively in spec/manifest.md):

    type    := NAME | NAME "[" args "]"
    NAME    := int | float | bool | str | bytes | None | Any | Tensor | NDArray | Array
             | List | Set | FrozenSet | Tuple | Dict | Optional | Union | Literal
             | <struct name> | <enum name>
    Tuple[T, ...]   variable length;  Tuple[A, B]  fixed;  Tuple[()]  empty
    Union arms and Literal values are written sorted, None last (see canonical)
    Array[q]        array.array with a known typecode; bare Array when unknown
    Literal[v, ...] JSON scalars ("text", 1, true, null)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterator, Optional

PRIMITIVES = ("int", "float", "bool", "str", "bytes", "None")
LEAVES = ("Any", "Tensor", "NDArray")
CONTAINERS = {"List": 1, "Set": 1, "FrozenSet": 1, "Dict": 2}
KEYWORDS = set(PRIMITIVES) | set(LEAVES) | set(CONTAINERS) | {"Array", "Tuple", "Optional", "Union", "Literal"}


@dataclass(frozen=True)
class T:
    """One node of a type expression.

    kind is a primitive or leaf name, a container name, "Tuple" (args fixed),
    "VarTuple", "Union", "Literal" (values), "Array" (typecode) or "Ref" (name).
    """

    kind: str
    args: tuple["T", ...] = ()
    values: tuple[Any, ...] = ()
    name: str | None = None  # Ref target or Array typecode

    def walk(self) -> Iterator["T"]:
        yield self
        for a in self.args:
            yield from a.walk()

    @property
    def ref(self) -> str:
        """The struct or enum a Ref node names."""
        if self.kind != "Ref" or self.name is None:
            raise ValueError(f"{self!r} names no struct or enum")
        return self.name

    def refs(self) -> set[str]:
        return {n.name for n in self.walk() if n.kind == "Ref" and n.name}

    @property
    def is_optional(self) -> bool:
        return self.kind == "Union" and any(a.kind == "None" for a in self.args)


NONE = T("None")


def canonical(t: T) -> T:
    """The order-free spelling: Union arms and Literal values sorted (None last).

    Their order has no meaning on the wire, and Python's typing caches make the order
    an import-order accident (Union[int, str] and Union[str, int] are one cached object),
    so manifests store them sorted."""
    args = tuple(canonical(a) for a in t.args)
    if t.kind == "Union":
        rest = sorted({render(a): a for a in args if a.kind != "None"}.items())
        args = tuple(a for _, a in rest) + ((NONE,) if NONE in args else ())
        return T("Union", args)
    if t.kind == "Literal":
        return T("Literal", values=tuple(sorted(t.values, key=lambda v: (type(v).__name__, str(v)))))
    return T(t.kind, args, t.values, t.name)


def render(t: T, *, leaf: Callable[[T], Optional[str]] = lambda t: None,
           literal: Callable[[Any], str] = json.dumps) -> str:
    """The type expression of a node. ``leaf`` may spell a node its own way (codegen spells
    Python annotations: torch.Tensor, array); ``literal`` spells a Literal's values."""
    own = leaf(t)
    if own is not None:
        return own

    def sub(a: T) -> str:
        return render(a, leaf=leaf, literal=literal)

    k = t.kind
    if k in PRIMITIVES or k in LEAVES:
        return k
    if k == "Ref":
        return t.name or "?"
    if k == "Array":
        return f"Array[{t.name}]" if t.name else "Array"
    if k in CONTAINERS:
        return f"{k}[{', '.join(sub(a) for a in t.args)}]"
    if k == "VarTuple":
        return f"Tuple[{sub(t.args[0])}, ...]"
    if k == "Tuple":
        return f"Tuple[{', '.join(sub(a) for a in t.args)}]" if t.args else "Tuple[()]"
    if k == "Literal":
        return f"Literal[{', '.join(literal(v) for v in t.values)}]"
    if k == "Union":
        rest = [a for a in t.args if a.kind != "None"]
        if len(rest) < len(t.args):
            inner = rest[0] if len(rest) == 1 else T("Union", tuple(rest))
            return f"Optional[{sub(inner)}]"
        return f"Union[{', '.join(sub(a) for a in t.args)}]"
    raise ValueError(f"cannot render type node {t!r}")


_TOKEN = re.compile(r'\s*(\.\.\.|\(\)|[\[\],]|"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|[A-Za-z_][A-Za-z_0-9]*)')


class TypeExprError(ValueError):
    pass


@lru_cache(maxsize=8192)  # T is frozen: one parse per spelling (a diff parses each type many times)
def parse(text: str) -> T:
    tokens = _tokenize(text)
    try:
        pos, node = _parse(tokens, 0, text)
    except IndexError:
        raise TypeExprError(f"unexpected end of type expression {text!r}") from None
    if pos != len(tokens):
        raise TypeExprError(f"trailing input in type expression {text!r}")
    return node


def _tokenize(text: str) -> list[str]:
    out, i = [], 0
    while i < len(text):
        m = _TOKEN.match(text, i)
        if not m:
            if text[i:].strip() == "":
                break
            raise TypeExprError(f"bad character at {i} in type expression {text!r}")
        out.append(m.group(1))
        i = m.end()
    return out


def _parse(tok: list[str], i: int, text: str) -> tuple[int, T]:
    if i >= len(tok):
        raise TypeExprError(f"unexpected end of type expression {text!r}")
    name = tok[i]
    i += 1
    has_args = i < len(tok) and tok[i] == "["
    if name == "Literal":
        if not has_args:
            raise TypeExprError(f"Literal needs values in {text!r}")
        values, i = [], i + 1
        while True:
            values.append(json.loads(tok[i]))
            i += 1
            if tok[i] == "]":
                return i + 1, T("Literal", values=tuple(values))
            if tok[i] != ",":
                raise TypeExprError(f"expected ',' in Literal of {text!r}")
            i += 1
    if name == "Array":
        if has_args:
            return i + 3, T("Array", name=tok[i + 1])
        return i, T("Array")
    if not has_args:
        if name in PRIMITIVES or name in LEAVES:
            return i, T(name)
        if name in KEYWORDS:
            raise TypeExprError(f"{name} needs arguments in {text!r}")
        return i, T("Ref", name=name)
    args: list[T] = []
    i += 1
    variadic = empty = False
    while True:
        if tok[i] == "...":
            variadic, i = True, i + 1
        elif tok[i] == "()":
            empty, i = True, i + 1
        else:
            i, a = _parse(tok, i, text)
            args.append(a)
        if tok[i] == "]":
            i += 1
            break
        if tok[i] != ",":
            raise TypeExprError(f"expected ',' or ']' in {text!r}")
        i += 1
    if name == "Optional":
        inner = args[0]
        arms = inner.args if inner.kind == "Union" else (inner,)
        return i, T("Union", tuple(arms) + (NONE,))
    if name == "Union":
        return i, T("Union", tuple(args))
    if name == "Tuple":
        if variadic:
            return i, T("VarTuple", (args[0],))
        return i, T("Tuple", () if empty else tuple(args))
    if name in CONTAINERS:
        if len(args) != CONTAINERS[name]:
            raise TypeExprError(f"{name} takes {CONTAINERS[name]} argument(s) in {text!r}")
        return i, T(name, tuple(args))
    raise TypeExprError(f"{name} takes no arguments in {text!r}")
