"""Generated values: hypothesis draws instances of every struct from its own field types."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable

import pytest

from conformance import profiles
from conformance.compare import differences
from conformance.plugin import check
from conformance.plugin.hooks import known_cause, known_triggers
from conformance.suite.failure import Failure, fail, raise_failure, round_trip_step
from conformance.transport import TRANSPORTS

REQUIREMENT = "R-MSG-*, R-VAL-*, R-EXT-* (values drawn from the field types)"


def _strategy(ipc, struct, triggers):
    if struct not in ipc.live_manifest.structs:
        fail(f"{ipc.adapter.label} has no struct {struct}: no generated example can cover it", "R-MSG-10",
             step="the implementation's live catalogue (Adapter.live_manifest())", kind="Failed", ipc=ipc)
    return ipc.strategies_without(triggers).for_struct(struct)


class _KnownCause(BaseException):
    """Carries a failure the expected-failure list explains out of a hypothesis search. Not an
    Exception: hypothesis treats it as no test failure and lets it through at once, so the
    search draws nothing more and shrinks nothing (its time goes to unknown defects only)."""

    def __init__(self, failure: BaseException) -> None:
        super().__init__(str(failure))
        self.failure = failure


def _search(ipc, request: pytest.FixtureRequest, struct: str, body: Callable[[Any], None]) -> None:
    """Run body on the drawn values of struct. Under a derandomized profile the draws depend
    only on the check id and the manifest (profiles.seed_for, profiles.canonical_draws)."""
    check_id = request.node.callspec.id
    record = _recorder(request.config.getoption("--ipc-record-draws"), check_id)
    # A known defect's trigger is never drawn: the search goes on for other defects instead
    # of shrinking to the known one's example (conformance/expectations, 'trigger:').
    triggers = known_triggers(request.config, check_id)
    # hypothesis is imported by the first Generated check that runs, not by collection: a run
    # that selects none never loads it
    from hypothesis import given, seed

    @ipc.hypothesis_settings
    @given(_strategy(ipc, struct, triggers))
    def search(value):
        record(value)
        try:
            body(value)
        except (Exception, pytest.fail.Exception) as exc:
            # A failure the list explains (a listed cause, the check's own line) is known: the
            # check's verdict is reached, so the search stops here, unshrunk. Any other failure
            # is shrunk by hypothesis as usual (a new defect deserves its smallest example).
            if known_cause(request.config, check_id, exc) is None:
                raise
            if hasattr(exc, "add_note"):  # Python 3.11+
                exc.add_note(f"drawn value (the search stopped at this listed failure, not shrunk): "
                             f"{_short(value)}")
            raise _KnownCause(exc) from None

    known = None
    try:
        if profiles.derandomized(ipc.profile):
            with profiles.canonical_draws():
                seed(profiles.seed_for(check_id, ipc.live_manifest))(search)()
        else:
            search()
    except _KnownCause as stop:
        known = stop.failure
    if known is not None:
        raise known


def _short(value: Any, limit: int = 400) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _excluded(request: pytest.FixtureRequest) -> list[str]:
    triggers = known_triggers(request.config, request.node.callspec.id)
    return [f"not drawn (known defects' triggers): {', '.join(triggers)}"] if triggers else []


def _recorder(path: str | None, check_id: str) -> Callable[[Any], None]:
    """Append one line per drawn value (check id, digest of its JSON view) to path: how a
    test proves that two adapters of one implementation draw the same values."""
    if not path:
        return lambda value: None
    from conformance.schema.golden.view import ViewError, dumps, to_view

    def record(value: Any) -> None:
        try:
            text = dumps(to_view(value))
        except (ViewError, TypeError, ValueError):
            text = repr(value)
        with open(path, "a") as out:
            out.write(json.dumps({"id": check_id, "draw": hashlib.sha256(text.encode()).hexdigest()}) + "\n")

    return record


@check("Generated", per=("live_struct", "transport"), name="RoundTrip")
def test_generated_roundtrip(ipc, live_struct, transport, request):
    adapter = ipc.adapter

    def roundtrip(value):
        data = adapter.encode(value, transport)
        diffs = differences(value, adapter.decode(data, transport))
        if diffs:
            raise_failure(Failure(f"{live_struct} changed crossing {transport}", REQUIREMENT,
                                  round_trip_step(ipc, value, data, transport), diffs, data, value,
                                  notes=_excluded(request)), ipc)

    _search(ipc, request, live_struct, roundtrip)


@check("Generated", per=("live_struct",), name="CrossTransport")
def test_generated_cross_transport(ipc, live_struct, request):
    if len(ipc.transports) < 2:
        pytest.skip("needs both transports")
    adapter = ipc.adapter

    def cross(value):
        got = [adapter.decode(adapter.encode(value, t), t) for t in TRANSPORTS]
        diffs = differences(*got)
        if diffs:
            step = round_trip_step(ipc, value, adapter.encode(value, "msgpack"), "msgpack")
            raise_failure(Failure(f"{live_struct} differs between pickle and msgpack", "R-NORM-1",
                                  "the implementation's encode and decode over each transport, the two results "
                                  f"compared (expected: the pickle result; msgpack: {step})", diffs, value=value,
                                  notes=_excluded(request)), ipc)

    _search(ipc, request, live_struct, cross)
