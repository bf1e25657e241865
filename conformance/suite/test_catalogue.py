"""Catalogue checks: the implementation defines every struct of the manifest, the same way, and
decodes a message subclass defined after start-up."""

from __future__ import annotations

import types

import msgspec

from conformance.compare import differences
from conformance.plugin import check
from conformance.suite.capability import require
from conformance.suite.failure import ENCODE, fail

LIVE = "the implementation's live catalogue (Adapter.live_manifest()) against the run's manifest"


def _without_module(spec: msgspec.Struct) -> msgspec.Struct:
    return msgspec.structs.replace(spec, module="")


@check("Catalogue", name="MatchesManifest")
def test_matches_manifest(ipc, struct):
    live = ipc.adapter.live_manifest().structs.get(struct)
    if live is None:
        fail(f"{ipc.adapter.label} has no message {struct} of {ipc.manifest.id}", "R-MSG-10", step=LIVE, ipc=ipc)
    expected = ipc.manifest.structs[struct]
    changes = [
        f"{f.name}: {f.type}" for f in expected.fields if f not in live.fields
    ] + [f"extra/changed {f.name}: {f.type}" for f in live.fields if f not in expected.fields]
    if _without_module(live) != _without_module(expected):
        fail(f"{struct} differs from {ipc.manifest.id}: {changes or 'options/tag/base differ'}", "R-MSG-10",
             step=LIVE, differences=changes, ipc=ipc,
             notes=[f"see it: ipc-conformance schema check --impl IMPL --against {ipc.manifest.id}"])


@check("Catalogue", name="InTopLevelUnion")
def test_in_top_level_union(ipc, struct):
    names = {t.__name__ for t in ipc.adapter.message_types()}
    if struct not in names:
        fail(f"the top-level decoder of {ipc.adapter.label} does not accept {struct}", "R-MSG-7",
             step="the implementation's message types (Adapter.message_types()): its top-level union",
             notes=[f"its union: {', '.join(sorted(names))}"], ipc=ipc)


@check("Catalogue", per=(), name="NoUnlistedMessages")
def test_no_unlisted_messages(ipc, ipc_check_id):
    live = {s.name for s in ipc.adapter.live_manifest().messages}
    extra = sorted(live - set(ipc.manifest_message_names()))
    if extra:
        fail(f"messages not in {ipc.manifest.id}: {extra} (re-extract the manifest or remove them)", "R-MSG-7",
             step=LIVE, differences=[f"{name}: not in {ipc.manifest.id}" for name in extra], ipc=ipc)


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
        data = ipc.adapter.encode(child, transport)
        got = ipc.adapter.decode(data, transport)
        wrong = differences(child, got)
        if type(got).__name__ != late.__name__ or wrong:
            fail(f"a late-defined grandchild {late.__name__} did not decode over {transport}", "R-MSG-8",
                 step=f"{ENCODE} ({late.__name__}, defined after start-up), then its decode, over {transport}",
                 differences=wrong or [f"$: expected {late.__name__}, got {type(got).__name__}"],
                 data=data, value=child, ipc=ipc)
