"""Which classes of a catalogue are messages: one rule for import mode (live classes) and
source mode (classes read with ast), so the two extract the same manifest."""

from __future__ import annotations

import difflib
from typing import Callable, Iterable, List, Sequence, TypeVar

from conformance.errors import UsageError
from conformance.schema.manifest.model import Role

C = TypeVar("C")

__all__ = ["message_union", "struct_role"]


def message_union(roots: Sequence[C], registered: Sequence[C], subclasses: Callable[[C], Iterable[C]],
                  name: Callable[[C], str], *, dataclass_catalogue: bool, exclude: Iterable[str]) -> List[C]:
    """Every subclass of each root (the root itself when it has none), then the classes the
    union attribute registers, once each, less `exclude` (a name that is no message of the union
    is the user's typo: UsageError). In a dataclass catalogue the HTTP-side
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
    candidates = [name(c) for c in union]
    if dataclass_catalogue:
        names = set(candidates)
        union = [c for c in union if "Tokenized" + name(c) not in names]
    excluded = set(exclude)
    for unknown in sorted(excluded - set(candidates)):
        near = difflib.get_close_matches(unknown, candidates, n=1)
        raise UsageError(f"--exclude {unknown}: no message of that name in the catalogue's union"
                         + (f" (did you mean {near[0]}?)" if near else ""))
    return [c for c in union if name(c) not in excluded]


def struct_role(name: str, messages: set[str], is_base: Callable[[], bool]) -> Role:
    """A struct's role in the manifest: wrapper (PickleWrapper), message (in the union), base (a
    parent of a message: `is_base`, asked only then) or nested (reached through fields)."""
    if name == "PickleWrapper":
        return "wrapper"
    if name in messages:
        return "message"
    return "base" if is_base() else "nested"
