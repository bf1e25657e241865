"""Catalogue checks: the implementation defines every struct of the manifest, the same way, and
decodes a message subclass defined after start-up."""

from __future__ import annotations

import types

import msgspec

from conformance.compare import differences
from conformance.plugin import check
from conformance.suite.capability import require


def _without_module(spec: msgspec.Struct) -> msgspec.Struct:
    return msgspec.structs.replace(spec, module="")


@check("Catalogue", name="MatchesManifest")
def test_matches_manifest(ipc, struct):
    live = ipc.adapter.live_manifest().structs.get(struct)
    assert live is not None, f"{ipc.adapter.label} has no message {struct} of {ipc.manifest.id}"
    expected = ipc.manifest.structs[struct]
    changes = [
        f"{f.name}: {f.type}" for f in expected.fields if f not in live.fields
    ] + [f"extra/changed {f.name}: {f.type}" for f in live.fields if f not in expected.fields]
    assert _without_module(live) == _without_module(expected), (
        f"{struct} differs from {ipc.manifest.id}: {changes or 'options/tag/base differ'}"
    )


@check("Catalogue", name="InTopLevelUnion")
def test_in_top_level_union(ipc, struct):
    names = {t.__name__ for t in ipc.adapter.message_types()}
    assert struct in names, f"the top-level decoder of {ipc.adapter.label} does not accept {struct}"


@check("Catalogue", per=(), name="NoUnlistedMessages")
def test_no_unlisted_messages(ipc, ipc_check_id):
    live = {s.name for s in ipc.adapter.live_manifest().messages}
    extra = sorted(live - set(ipc.manifest_message_names()))
    assert not extra, f"messages not in {ipc.manifest.id}: {extra} (re-extract the manifest or remove them)"


@check("Catalogue", per=(), name="LateGrandchildDecodes")
def test_late_grandchild_decodes(ipc, ipc_check_id):
    """A subclass of a message, defined after start-up, is a grandchild of the request base."""
    require(ipc, "define")
    parent_name = next(s.name for s in ipc.manifest.messages if s.base and ipc.manifest.structs[s.base].role == "base")
    parent = ipc.classes[parent_name]
    late = types.new_class(f"Late{parent_name}", (parent,), {"kw_only": True})
    late.__module__, globals()[late.__name__] = __name__, late  # so pickle can find it by name
    value = ipc.instance(parent_name, "typical")
    child = late(**{name: getattr(value, name) for name in value.__struct_fields__})
    for transport in ipc.transports:
        got = ipc.adapter.decode(ipc.adapter.encode(child, transport), transport)
        assert type(got).__name__ == late.__name__ and not differences(child, got), (
            f"a late-defined grandchild {late.__name__} did not decode over {transport}")
