"""Strict peers (R-PW-5): a receive path for an untrusted peer refuses a PickleWrapper or keeps
it closed. Security.NoPickleFromUntrustedPeer proves no code runs; this check proves no pickle
runs at all, even one an allow-listed unpickler would accept (a plain dict)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from conformance.plugin import check, harness_error
from conformance.suite.capability import require
from conformance.suite.failure import fail
from conformance.suite.fields import opaque_structs, wrapper_fields

BENIGN = {"created": 1.5, "benign": True}


def _opened(value: Any) -> bool:
    return bool(value == BENIGN)


@check("Security", per=("case",), name="WrapperStaysClosed", cases={"case": lambda ipc: ["top_level", "field"]})
def test_untrusted_wrapper_stays_closed(ipc, case):
    require(ipc, "receive")
    wrapper = ipc.classes["PickleWrapper"](data=pickle.dumps(BENIGN, protocol=4))
    if case == "top_level":
        message, field = wrapper, None
    else:
        structs = opaque_structs(ipc)
        if not structs:
            pytest.skip("no message with a PickleWrapper field")
        message = ipc.instance(structs[0], "typical")
        field = wrapper_fields(ipc.manifest.structs[structs[0]])[0]
        setattr(message, field, wrapper)
    data = ipc.adapter.encode(message, "msgpack")
    try:
        got = ipc.adapter.receive(data, "msgpack")
    except Exception as exc:
        if harness_error(exc):
            raise  # a crash or a hang is no refusal
        return  # refused: right
    opened = got if field is None else getattr(got, field, None)
    if _opened(opened):
        fail(f"the untrusted msgpack receive path unpickled a PickleWrapper ({case}): it handed on {opened!r}; "
             "SPEC R-PW-5: refuse it or keep it closed", "R-PW-5",
             step="the implementation's receive path for an untrusted peer (receive), on msgpack bytes of its own "
                  f"encode holding a PickleWrapper {'as the message' if case == 'top_level' else f'at {field}'}",
             data=data, value=got, ipc=ipc)
