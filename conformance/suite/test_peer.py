"""Mixed versions (`ipc-conformance run --peer sglang-0.5.22`): the implementation exchanges
every message with a peer on another release, in both directions and on each transport.

The peer is the release's manifest: its structs generated in-process, its golden vectors.
to-<peer>: the implementation encodes its canonical values, the peer decodes them.
from-<peer>: the peer's vectors (msgpack) or pickles (classes named where the implementation
keeps them) are decoded by the implementation. Each exchange is ok, fails loudly (the reader
raises) or goes silently wrong (the reader holds another value; the message names the field
and the value), with the schema-diff rules that explain it.

Level Recommended: whether two releases interoperate is a property of the pair, not a
defect of one implementation, so these checks never fail a plain run; they list what a
rolling upgrade would break, and `--strict --peer X` turns them into a gate for one.
An exchange the diff allows that fails anyway says which of the two is wrong.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from conformance.plugin import check
from conformance.schema.evolution import OK, PeerCheck
from conformance.schema.manifest import load_manifest
from conformance.suite.failure import fail

_CHECKS: dict[int, PeerCheck] = {}


def _peer_check(ipc: Any) -> Optional[PeerCheck]:
    peer = getattr(ipc, "peer", None)
    if not peer:
        return None
    if id(ipc) not in _CHECKS:
        _CHECKS[id(ipc)] = PeerCheck(ipc.adapter, ipc.manifest, load_manifest(peer))
    return _CHECKS[id(ipc)]


def _messages(ipc: Any) -> list[str]:
    pc = _peer_check(ipc)
    return pc.messages() if pc else []


def _directions(ipc: Any) -> list[str]:
    pc = _peer_check(ipc)
    return [f"to-{pc.peer_manifest.id}", f"from-{pc.peer_manifest.id}"] if pc else []


@check("Peer", per=("struct", "direction", "transport"), level="Recommended", name="Exchanges",
       cases={"struct": _messages, "direction": _directions})
def test_exchanges_with_peer(ipc, struct, direction, transport):
    pc = _peer_check(ipc)
    if pc is None:  # the cases come from the peer check: none without --peer
        pytest.skip("no --peer given")
    way = "to-peer" if direction.startswith("to-") else "from-peer"
    cannot = pc.sender(struct, way)
    if cannot:
        pytest.skip(f"{cannot}: nothing to send {direction}")
    e = pc.exchange(struct, way, transport)
    if e.outcome == OK:
        return
    rules = ", ".join(e.rules) or "no rule"
    where = f"{struct} {direction} over {transport}"
    step = (f"the implementation's encode of {struct}, decoded by the {pc.peer_manifest.id} peer" if way == "to-peer"
            else f"the {pc.peer_manifest.id} peer's encode of {struct}, decoded by the implementation")
    if e.allowed:
        fail(f"{where} fails {e.outcome} although the schema diff allows it ({e.expected}; "
             f"`ipc-conformance schema verify` tells whether the releases or the implementation "
             f"disagree): {e.evidence}", "R-VER-2", step=f"{step}, over {transport}", kind="Failed", ipc=ipc)
    fail(f"{e.outcome}: {where} [{rules}; schema diff {e.expected}]: {e.evidence}", "R-VER-2",
         step=f"{step}, over {transport}", kind="Failed", ipc=ipc)
