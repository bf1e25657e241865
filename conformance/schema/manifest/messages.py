"""Which classes of a catalogue are messages: one rule for import mode (live classes) and
source mode (classes read with ast), so the two extract the same manifest."""

from __future__ import annotations

from typing import Callable, Iterable, List, Sequence, TypeVar

from conformance.schema.manifest.model import Role

C = TypeVar("C")

__all__ = ["message_union", "struct_role"]


def message_union(roots: Sequence[C], registered: Sequence[C], subclasses: Callable[[C], Iterable[C]],
                  name: Callable[[C], str], *, dataclass_catalogue: bool, exclude: Iterable[str]) -> List[C]:
    """Every subclass of each root (the root itself when it has none), then the classes the
    union attribute registers, once each, less `exclude`. In a dataclass catalogue the HTTP-side
    request (GenerateReqInput) is tokenized before it crosses a process (TokenizedGenerateReqInput):
    it is no IPC message, as 0.5.15+ leave it out of _all_types."""
    union: List[C] = []
    for root in roots:
        for cls in list(subclasses(root)) or [root]:
            if cls not in union:
                union.append(cls)
    for cls in registered:
        if cls not in union:
            union.append(cls)
    if dataclass_catalogue:
        names = {name(c) for c in union}
        union = [c for c in union if "Tokenized" + name(c) not in names]
    excluded = set(exclude)
    return [c for c in union if name(c) not in excluded]


def struct_role(name: str, messages: set[str], is_base: Callable[[], bool]) -> Role:
    """A struct's role in the manifest: wrapper (PickleWrapper), message (in the union), base (a
    parent of a message: `is_base`, asked only then) or nested (reached through fields)."""
    if name == "PickleWrapper":
        return "wrapper"
    if name in messages:
        return "message"
    return "base" if is_base() else "nested"
