"""Gate: the reference structs are the committed manifest, and the generated module is fresh."""

from __future__ import annotations

from pathlib import Path

import msgspec

import reference_impl.io_struct as io_struct
from conformance.codegen import generate
from conformance.manifest import load_manifest
from conformance.manifest.extract import extract

MANIFEST = load_manifest(io_struct.MANIFEST_ID)
REGENERATE = f"ipc-conformance codegen {io_struct.MANIFEST_ID} --out reference_impl/io_struct.py"


def test_generated_module_is_fresh():
    on_disk = Path(io_struct.__file__).read_text()
    assert on_disk == generate(MANIFEST), f"reference_impl/io_struct.py is stale: run `{REGENERATE}`"


def test_reference_structs_match_the_manifest():
    live = extract("reference_impl.io_struct", union_attr="CUSTOM_MESSAGE_TYPES", array_typecode="q")
    strip = lambda specs: {n: msgspec.structs.replace(s, module="") for n, s in specs.items()}  # noqa: E731
    assert strip(live.structs) == strip(MANIFEST.structs), f"reference structs drifted: run `{REGENERATE}`"
    assert live.enums.keys() == MANIFEST.enums.keys()
    assert live.union == MANIFEST.union
