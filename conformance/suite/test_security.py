"""R-PW-5: the receive path for an untrusted peer never hands wire bytes to pickle. A
PickleWrapper whose bytes would create a file when unpickled, at top level or in a field."""

from __future__ import annotations

import pickle

import pytest

from conformance.plugin import check, harness_error
from conformance.suite.capability import require
from conformance.suite.failure import fail
from conformance.suite.fields import opaque_structs, wrapper_fields


class _Tripwire:
    """Unpickling this creates a file: proof that wire bytes reached pickle.loads."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _security_payload(ipc, case, marker):
    wrapper_cls = ipc.classes["PickleWrapper"]
    evil = wrapper_cls(data=pickle.dumps(_Tripwire(marker)))
    if case == "top_level":
        return evil
    struct = next(iter(opaque_structs(ipc)), None)
    if struct is None:
        pytest.skip("no message with a PickleWrapper field")
    value = ipc.instance(struct, "typical")
    setattr(value, wrapper_fields(ipc.manifest.structs[struct])[0], evil)
    return value


# R-PW-5 is a MUST: a receive path that unpickles wire bytes fails the run.
@check("Security", per=("case",), name="NoPickleFromUntrustedPeer",
       cases={"case": lambda ipc: ["top_level", "field"]})
def test_no_pickle_from_untrusted_peer(ipc, case, tmp_path):
    require(ipc, "receive")
    marker = tmp_path / "pickle-ran"
    data = ipc.adapter.encode(_security_payload(ipc, case, marker), "msgpack")
    try:
        ipc.adapter.receive(data, "msgpack")
    except Exception as exc:
        if harness_error(exc):
            raise  # a crash or a hang is no refusal
        # refusing the message is the right answer
    if marker.exists():
        fail("msgpack receive path unpickled bytes from an untrusted peer (remote code execution)", "R-PW-5",
             step="the implementation's receive path for an untrusted peer (receive), on msgpack bytes of its own "
                  f"encode holding a PickleWrapper {'as the message' if case == 'top_level' else 'in a field'} "
                  "whose pickle writes a file when loaded",
             data=data, notes=[f"the file it wrote: {marker}"], ipc=ipc)
