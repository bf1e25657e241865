"""One failure message for every check: what a third party needs to find the defect.

    raise_failure(Failure(f"{struct} ({variant}) changed crossing {transport}", "R-MSG-1",
                          step=round_trip_step(ipc, value, data, transport), differences=diffs,
                          data=data, value=value), ipc)

gives::

    AssertionError: AbortReq (typical) changed crossing msgpack at $.rid: expected 'a', got 'b' (+1 more)
      differences (2):
        $.rid: expected 'a', got 'b'
        $.weight_versions: expected list ['v1'], got NoneType None
      step: the implementation's decode of its own encode output: ...
      input: 61 bytes 97 a8 41 62 ...
      view: {"$struct": "AbortReq", ...}
      requirement: SPEC R-MSG-1
      replay: ipc-conformance run --impl reference -- -k 'Required.RoundTrip.AbortReq.Identical.msgpack.typical'

The FIRST line is what expected-failure lists match (conformance/expectations): ``<what>``,
then the first differing path when there are differences, then ``(+N more)``. Every
difference is kept on the exception (``ipc_failure``), so the verdict judges a listed check
difference by difference: a known defect never hides another. The replay line is added by
the verdict (conformance/plugin/verdicts.py) to every failure, so a check need not know its id.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, NoReturn, Optional, Sequence

__all__ = ["NOTHING", "Failure", "error_text", "fail", "hex_of", "json_input", "raise_failure", "round_trip_step",
           "view_of"]

NOTHING: Any = object()  # no input value to show
HEX_BYTES = 48  # bytes of an input shown in hex
VIEW_CHARS = 400  # characters of an input's JSON view
SHOWN_DIFFERENCES = 50

#: The step of a failure, by whose bytes and which direction.
ENCODE = "the implementation's encode of the runner's value"
DECODE_RUNNER_BYTES = "the implementation's decode of bytes the runner wrote"
HTTP = "the implementation's HTTP JSON validation of JSON the runner wrote"


@dataclasses.dataclass
class Failure:
    """A check's failure: `what` went wrong (struct, transport), the `requirement` it breaks
    (a SPEC id, e.g. "R-MSG-1"), the `step` (whose bytes, which direction), the
    `differences` ('path: what' lines, as compare.differences gives them), the input
    (`data`: bytes; `value`: a value shown as its JSON view) and any further `notes`.
    `kind` is the exception the check raises: "AssertionError", or "Failed" (pytest.fail)."""

    what: str
    requirement: str
    step: str = ""
    differences: Sequence[str] = ()
    data: Optional[bytes] = None
    value: Any = NOTHING
    notes: Sequence[str] = ()
    kind: str = "AssertionError"

    def first_line(self) -> str:
        if not self.differences:
            return self.what
        more = f" (+{len(self.differences) - 1} more)" if len(self.differences) > 1 else ""
        return f"{self.what} at {self.differences[0]}{more}"

    def alone(self) -> list[str]:
        """The message's first line (as pytest reports it, the exception's kind in front) that
        each difference would have had on its own: what the verdict judges one by one."""
        if not self.differences:
            return [f"{self.kind}: {self.first_line()}"]
        return [f"{self.kind}: {self.what} at {d}" for d in self.differences]

    def text(self) -> str:
        lines = [self.first_line()]
        if len(self.differences) > 1:
            lines.append(f"  differences ({len(self.differences)}):")
            lines += [f"    {d}" for d in self.differences[:SHOWN_DIFFERENCES]]
            if len(self.differences) > SHOWN_DIFFERENCES:
                lines.append(f"    ... and {len(self.differences) - SHOWN_DIFFERENCES} more")
        if self.step:
            lines.append(f"  step: {self.step}")
        if self.data is not None:
            lines.append(f"  input: {hex_of(self.data)}")
        if self.value is not NOTHING:
            lines.append(f"  view: {view_of(self.value)}")
        lines += [f"  {note}" for note in self.notes]
        lines.append(f"  requirement: SPEC {self.requirement}")
        # A value sent on purpose may hold a lone surrogate: escaped, the text can still be
        # written to a report file and sent from a pytest-xdist worker (UTF-8 only).
        return "\n".join(lines).encode("utf-8", "backslashreplace").decode("utf-8")


def raise_failure(failure: Failure, ipc: Any = None) -> NoReturn:
    """Fail the running check with `failure` (its text as the message, the object itself as
    the exception's ``ipc_failure``). With `ipc`, a testee's last requests and the commands
    that replay them on their own are added (spec/testee.md §3)."""
    import pytest

    reproducers = getattr(getattr(ipc, "adapter", None), "reproducers", None)
    if callable(reproducers):
        lines = [line.strip() for line in reproducers().splitlines() if line.strip()]
        failure = dataclasses.replace(failure, notes=[*failure.notes, *lines])
    text = failure.text()
    exc: BaseException = AssertionError(text) if failure.kind == "AssertionError" else pytest.fail.Exception(text)
    exc.ipc_failure = failure  # type: ignore[attr-defined]
    raise exc


def fail(what: str, requirement: str, *, ipc: Any = None, step: str = "", differences: Sequence[str] = (),
         data: Optional[bytes] = None, value: Any = NOTHING, notes: Sequence[str] = (),
         kind: str = "AssertionError") -> NoReturn:
    """`raise_failure(Failure(...), ipc)` in one call: how a check fails (never a bare `assert`,
    `pytest.fail` or `raise AssertionError`: tests/test_failure_helper.py keeps it so)."""
    raise_failure(Failure(what, requirement, step=step, differences=differences, data=data, value=value,
                          notes=notes, kind=kind), ipc)


#: the lines a testee's error adds about its request (testee/adapter.py): a failure raised with
#: `ipc` names the check's requests and their replay commands itself, whole
_TESTEE_CONTEXT = re.compile(r"^\s+(step|request|reproduce): ")


def error_text(exc: BaseException, limit: int = 300) -> str:
    """An implementation's error as a failure quotes it: its first line cut at `limit` characters,
    every further line whole, never cut inside a path; a testee's lines about its request left
    out, since the failure (raised with `ipc`) names the check's requests and replay commands."""
    lines = str(exc).splitlines() or [""]
    first = lines[0] if len(lines[0]) <= limit else lines[0][:limit] + " ..."
    return "\n".join([first, *(line for line in lines[1:] if not _TESTEE_CONTEXT.match(line))])


def json_input(text: str, limit: int = VIEW_CHARS) -> str:
    """The note naming a JSON input (an HTTP body), for `notes`: `input: JSON {...}`, truncated."""
    return f"input: JSON {text if len(text) <= limit else text[:limit] + ' ...'}"


def hex_of(data: Any, limit: int = HEX_BYTES) -> str:
    data = bytes(data)
    head = data[:limit].hex(" ")
    return f"{len(data)} bytes {head}{' ...' if len(data) > limit else ''}".rstrip()


def view_of(value: Any, limit: int = VIEW_CHARS) -> str:
    """The value's JSON view (conformance/schema/golden/view.py), else its repr, truncated."""
    from conformance.schema.golden.view import dumps, to_view

    try:
        text = dumps(to_view(value)).strip()
    except Exception:  # noqa: BLE001 - a value without a JSON view is shown as its repr
        try:
            text = repr(value)
        except Exception as exc:  # noqa: BLE001 - what an implementation returned may not even print
            text = f"a {type(value).__name__} that cannot be shown ({type(exc).__name__}: {exc})"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + " ..."


def round_trip_step(ipc: Any, sent: Any, data: bytes, transport: str) -> str:
    """Whose step changed a value that the implementation encoded (`data`) and decoded again.
    Over msgpack the runner reads the implementation's bytes with the spec tooling's codec:
    when they hold the sent value, the implementation's decode changed it; otherwise its
    encode did. Pickle bytes are the implementation's own format: not judged apart."""
    from conformance.compare import differences

    if transport != "msgpack":
        return (f"the implementation's encode, then its decode of its own encode output, over {transport} "
                "(pickle bytes are not read apart by the runner)")
    try:
        from conformance.schema.golden.catalogue import catalogue_for

        read = catalogue_for(ipc.manifest).decode(bytes(data))
    except Exception as exc:  # noqa: BLE001 - whatever the runner's codec says about the bytes
        return (f"the implementation's encode over msgpack: the runner's reference decode cannot read its bytes "
                f"({type(exc).__name__}: {str(exc)[:200]})")
    wrong = differences(sent, read)
    if wrong:
        return (f"the implementation's encode over msgpack: its bytes already hold another value (the runner's "
                f"reference decode reads them with {len(wrong)} difference(s), first {wrong[0]})")
    return ("the implementation's decode of its own encode output over msgpack: the bytes are right (the runner's "
            "reference decode reads the sent value from them), the decoded value is not")
