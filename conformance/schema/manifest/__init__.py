"""Wire manifests: an implementation's IPC catalogue as reviewable data."""

from conformance.schema.manifest.model import (
    Default,
    EnumSpec,
    Field,
    Manifest,
    StructSpec,
    bundled_manifests,
    load_manifest,
    save_manifest,
    wire_manifests,
)
from conformance.schema.manifest.typeexpr import T, TypeExprError, canonical, parse, render

__all__ = [
    "Default", "EnumSpec", "Field", "Manifest", "StructSpec", "T", "TypeExprError", "canonical",
    "bundled_manifests", "load_manifest", "parse", "render", "save_manifest", "wire_manifests",
]
