"""What the suite's checks import: `@check` (a test becomes a conformance check with an id per
parameter), the helpers checks share, and how a check id is read back from a test's node id.

Only the standard library at import time: the package is imported while pytest loads the plugin.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

if TYPE_CHECKING:
    import pytest

    from conformance.session import Session

AxisValues = Callable[["Session"], Sequence[str]]

#: Top-level primitives every implementation must carry (defect class: top-level-primitive).
PRIMITIVE_SAMPLES: dict[str, Any] = {
    "int": -(2**63),
    "float": -0.0,
    "bool": True,
    "bytes": b"\x00\xff",
    "None": None,
    "str": "héllo 漢字",
}

HARNESS_ERROR = "harness error: "

# The id is the test's parameter id; pytest-xdist's loadgroup may append "@<group>" after it.
_CHECK_ID = re.compile(r"\[((?:Required|Recommended)\.[^\[\]]*)\](?:@[^\[\]]*)?$")


def check(area: str, *, per: tuple[str, ...] = ("struct",), level: str = "Required", name: str = "",
          cases: Optional[Mapping[str, AxisValues]] = None) -> Any:
    """Declare a suite test as a conformance check, parametrized over the axes in `per`:
    struct, live_struct, transport, variant, primitive, or an axis of its own given in
    `cases` (axis -> function of the session giving its values). The first axis names the
    subject: ids read Level.Area.<subject>.Name[.<other axes>...]."""
    import pytest

    def mark(fn: Any) -> Any:
        fn._ipc_check = (level, area, per, name or fn.__name__.removeprefix("test_"), dict(cases or {}))
        return pytest.mark.ipc_check(level=level)(fn)

    return mark


def is_check(function: Any) -> bool:
    return getattr(function, "_ipc_check", None) is not None


def _axis_values(ipc: Session, axis: str, cases: Mapping[str, AxisValues]) -> Sequence[Any]:
    if axis in cases:
        return list(cases[axis](ipc))
    builtin: dict[str, Callable[[], Sequence[Any]]] = {
        "struct": lambda: ipc.message_names,
        "live_struct": lambda: ipc.all_message_names,
        "transport": lambda: list(ipc.transports),
        "variant": lambda: list(ipc.variants),
        "primitive": lambda: list(PRIMITIVE_SAMPLES),
    }
    return builtin[axis]()


def parametrize(metafunc: pytest.Metafunc, ipc: Session) -> None:
    """Parametrize a check over its axes; each parameter's id is the check id."""
    level, area, per, name, cases = metafunc.function._ipc_check
    combos: list[dict[str, Any]] = [{}]
    for axis in per:
        combos = [{**c, axis: v} for c in combos for v in _axis_values(ipc, axis, cases)]
    ids = []
    for c in combos:
        subject = str(c[per[0]]) if per else "All"
        suffix = "".join(f".{c[a]}" for a in per[1:])
        ids.append(f"{level}.{area}.{subject}.{name}{suffix}")
    if per:
        metafunc.parametrize(list(per), [tuple(c[a] for a in per) for c in combos], ids=ids)
    else:
        metafunc.parametrize("ipc_check_id", [ids[0]], ids=ids)


def identity_fields(item: Any) -> Optional[dict[str, Any]]:
    """The parts of a collected check's id (records.CheckIdentity's fields), from its declaration
    and its parameters, never from the id: None when the item is no conformance check."""
    declared = getattr(getattr(item, "function", None), "_ipc_check", None)
    callspec = getattr(item, "callspec", None)
    if declared is None or callspec is None:
        return None
    level, area, per, name, _ = declared
    params = callspec.params
    if per and any(axis not in params for axis in per):
        return None
    return {"level": level, "area": area, "subject": str(params[per[0]]) if per else "All", "name": name,
            "axes": [[axis, str(params[axis])] for axis in per[1:]]}


def check_id_of(nodeid: str) -> Optional[str]:
    """The check id in a test's node id, or None when the test is no conformance check."""
    if "[" not in nodeid:  # the common case in other projects: no parameters at all
        return None
    found = _CHECK_ID.search(nodeid)
    return found.group(1) if found else None


def failure_message(what: str, diffs: Sequence[str], shown: int = 10) -> str:
    """A check's failure: what changed and the first differing path on the FIRST line (the
    line expected-failure lists match), then the next differences, one per line."""
    if len(diffs) == 1:
        return f"{what} at {diffs[0]}"
    return f"{what} at {diffs[0]} (+{len(diffs) - 1} more)\n  " + "\n  ".join(diffs[1:shown])


def harness_error(exc: Optional[BaseException]) -> bool:
    """Whether exc is (or was caused by) a harness failure: the testee crashed, timed out
    or broke the protocol. Such a failure is never skipped, expected or merely recommended."""
    from conformance.testee.adapter import TesteeRuntimeError
    from conformance.testee.protocol import ProtocolError

    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, (TesteeRuntimeError, ProtocolError)):
            return True
        todo += [e.__cause__, e.__context__, *getattr(e, "exceptions", ())]
    return False
