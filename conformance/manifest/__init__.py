"""Wire manifests: an implementation's IPC catalogue as reviewable data."""

from .model import Default, EnumSpec, Field, Manifest, StructSpec, bundled_manifests, load_manifest, save_manifest
from .typeexpr import T, TypeExprError, canonical, parse, render

__all__ = [
    "Default", "EnumSpec", "Field", "Manifest", "StructSpec", "T", "TypeExprError", "canonical",
    "bundled_manifests", "load_manifest", "parse", "render", "save_manifest",
]
