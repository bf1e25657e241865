"""Implementations that say they are SGLang without being a bundled release (tests/test_dev_identity.py):
the reference's classes under a development version, or under a release whose catalogue was edited."""

from __future__ import annotations

import json

import msgspec

from conformance.schema.manifest import Manifest, load_manifest
from reference_tools.adapter import ReferenceAdapter


def edited(manifest_id: str = "sglang-0.5.23") -> Manifest:
    """The bundled manifest with a field inserted into AbortReq before its own first field (after
    those it inherits: where a subclass can put one): breaking on msgpack, its positions shift."""
    data = json.loads(load_manifest(manifest_id).to_json())
    struct = data["structs"]["AbortReq"]
    inherited = len(data["structs"][struct["base"]]["fields"]) if struct.get("base") else 0
    struct["fields"].insert(inherited, {"name": "inserted", "type": "int", "default": {"kind": "value", "value": 0}})
    return msgspec.json.decode(json.dumps(data).encode(), type=Manifest)


class _InstalledSglang(ReferenceAdapter):
    """The reference, claiming to be an installed `sglang` of version `installed`."""

    name = "sglang"
    installed = ""

    def __init__(self) -> None:
        super().__init__()
        self.version = self.installed

    def manifest_id(self) -> str:
        return self.label  # sglang-<installed>, not the reference's MANIFEST_ID


class DevInstall(_InstalledSglang):
    """`sglang 0.5.24.dev0`: no bundled manifest, no expected-failure list of its own."""

    installed = "0.5.24.dev0"


class EditedRelease(_InstalledSglang):
    """`sglang 0.5.23` whose io_struct.py was edited: its live catalogue is not the release's."""

    installed = "0.5.23"

    def live_manifest(self) -> Manifest:
        return edited()


class DevInstallBreaking(_InstalledSglang):
    """`sglang 0.5.24.dev0` whose catalogue has a breaking change against 0.5.23, its nearest release."""

    installed = "0.5.24.dev0"

    def live_manifest(self) -> Manifest:
        return msgspec.structs.replace(edited(), version=self.installed)
