"""The manifest file: an implementation's IPC catalogue as data (spec/manifest.md)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Union

import msgspec

from conformance.errors import UsageError
from conformance.schema.manifest.typeexpr import T, parse

FORMAT_VERSION = 1


class Default(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True, frozen=True):
    """How a field gets its value when the sender leaves it out.

    kind: "required" (no default), "value" (a JSON value), "enum" (a member
    name of the field's enum), "factory" (list, dict, set, tuple, frozenset, a
    struct name, or "opaque": any other callable, e.g. a fresh uuid).
    """

    kind: Literal["required", "value", "enum", "factory"]
    value: Any = None
    factory: Optional[str] = None


REQUIRED = Default("required")


class Field(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True, dict=True):
    name: str
    type: str
    default: Default = REQUIRED
    # Name on the wire when it differs (map-encoded structs with rename=...).
    encode_name: Optional[str] = None
    # Markers beside the type, e.g. "base64": HTTP JSON carries these bytes as base64.
    annotations: List[str] = []

    @cached_property
    def type_expr(self) -> T:
        return parse(self.type)


#: "message": in the top-level union; "wrapper": PickleWrapper; "base": a parent of messages
#: only; "nested": reached only through fields.
Role = Literal["message", "wrapper", "base", "nested"]


class StructSpec(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True, dict=True):
    name: str
    module: str
    fields: List[Field]
    # Wire tag (array_like: first array element); None for untagged structs.
    tag: Optional[str] = None
    tag_field: Optional[str] = None
    # Nearest struct base class inside the catalogue (for reviewers and codegen).
    base: Optional[str] = None
    options: Dict[str, bool] = {}
    role: Role = "nested"

    @property
    def array_like(self) -> bool:
        return self.options.get("array_like", False)

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no field {name!r}")


class EnumSpec(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True):
    name: str
    module: str
    members: Dict[str, Union[int, str]]
    base: str = "Enum"


#: `extracted_with` key: the catalogue module's other names for its structs, `Alias=Class, ...`
#: (what pairs a renamed struct whose alias kept its name; spec/manifest.md §1).
ALIASES = "aliases"


def aliases_of(manifest: "Manifest") -> Dict[str, str]:
    """alias -> struct name, from `extracted_with["aliases"]` (none when it was not recorded)."""
    text = manifest.extracted_with.get(ALIASES, "")
    pairs = (item.strip().partition("=") for item in text.split(",") if "=" in item)
    return {alias.strip(): name.strip() for alias, _, name in pairs}


class Manifest(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True, dict=True):
    implementation: str
    version: str
    module: str
    structs: Dict[str, StructSpec]
    enums: Dict[str, EnumSpec] = {}
    # Names in the top-level decoder's union, in order: structs then primitives.
    union: List[str] = []
    format: int = FORMAT_VERSION
    extracted_with: Dict[str, str] = {}

    @property
    def id(self) -> str:
        return f"{self.implementation}-{self.version}"

    @property
    def is_dataclass_catalogue(self) -> bool:
        """Dataclasses sent with pickle (SGLang before its msgspec migration): no msgpack wire."""
        return any(s.options.get("dataclass") for s in self.structs.values())

    @property
    def modules(self) -> frozenset[str]:
        """The modules its structs and enums live in (pickle names a class by its module)."""
        return frozenset([*(s.module for s in self.structs.values()), *(e.module for e in self.enums.values())])

    @property
    def messages(self) -> List[StructSpec]:
        return [s for s in self.structs.values() if s.role == "message"]

    def to_json(self) -> bytes:
        return msgspec.json.format(msgspec.json.encode(self), indent=2) + b"\n"


def load_manifest(source: Union[str, Path]) -> Manifest:
    """Load a manifest from a file path, or by id ("sglang-0.5.23") from the bundled ones."""
    from conformance.paths import manifests_dir

    path = Path(source)
    if not path.exists():
        path = manifests_dir() / f"{source}.json"
    try:
        manifest = msgspec.json.decode(path.read_bytes(), type=Manifest)
    except FileNotFoundError:
        known = ", ".join(bundled_manifests()) or "none"
        raise UsageError(f"no manifest {str(source)!r}: give a manifest file or a bundled id ({known})") from None
    except (msgspec.DecodeError, IsADirectoryError) as exc:
        raise UsageError(f"{path} is not a manifest (spec/manifest.md): {exc}") from None
    if manifest.format != FORMAT_VERSION:
        raise UsageError(f"{path}: manifest format {manifest.format}, this suite reads {FORMAT_VERSION}")
    return manifest


def bundled_manifests() -> List[str]:
    from conformance.paths import manifests_dir

    return sorted(p.stem for p in manifests_dir().glob("*.json"))


def wire_manifests() -> List[str]:
    """The bundled catalogues with a msgpack wire: everything golden vectors, refusal corpora
    and byte-level checks are made for. A dataclass catalogue (pickle only) is bundled for the
    migration report and schema diff, and has none of them."""
    return [m for m in bundled_manifests() if not load_manifest(m).is_dataclass_catalogue]


def save_manifest(manifest: Manifest, path: Union[str, Path]) -> None:
    Path(path).write_bytes(manifest.to_json())
