"""Catalogue checks: the implementation defines every struct of the manifest, the same way."""

from __future__ import annotations

import msgspec

from conformance.plugin import check


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
