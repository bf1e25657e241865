"""Gate: the reference structs are the committed manifest, and the generated module is fresh."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec

import reference_impl.io_struct as io_struct
from conformance.schema.codegen import generate
from conformance.schema.manifest import Manifest, load_manifest

MANIFEST = load_manifest(io_struct.MANIFEST_ID)
REGENERATE = f"ipc-conformance codegen {io_struct.MANIFEST_ID} --out reference_impl/io_struct.py"


def test_generated_module_is_fresh():
    on_disk = Path(io_struct.__file__).read_text()
    assert on_disk == generate(MANIFEST), f"reference_impl/io_struct.py is stale: run `{REGENERATE}`"


def test_reference_structs_match_the_manifest():
    # A fresh interpreter: subclasses other tests define at run time are not the catalogue.
    out = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "manifest", "extract", "reference_impl.io_struct",
         "--union-attr", "CUSTOM_MESSAGE_TYPES", "--array-typecode", "q"],
        check=True, capture_output=True,
    ).stdout
    live = msgspec.json.decode(out, type=Manifest)
    strip = lambda specs: {n: msgspec.structs.replace(s, module="") for n, s in specs.items()}
    assert strip(live.structs) == strip(MANIFEST.structs), f"reference structs drifted: run `{REGENERATE}`"
    assert live.enums.keys() == MANIFEST.enums.keys()
    assert live.union == MANIFEST.union
