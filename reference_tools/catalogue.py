"""The reference implementation's classes as the golden catalogue of its manifest (entry point
`ipc_conformance.catalogues`: reference): chosen by content, never by id (an edited
`sglang-0.5.23` is another catalogue). reference_impl/io_struct.py is what codegen makes of its
manifest, so the manifest is the reference's when codegen makes the same file. Where torch is not
installed the reference cannot load, and conformance generates the classes instead."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from conformance.schema.manifest import Manifest


def provide(manifest: Manifest) -> Optional[tuple[Mapping[str, type], Callable[[Any], bytes], Callable[[bytes], Any]]]:
    from conformance.schema.wire_ext import torch_available

    if not torch_available():
        return None
    from conformance.schema.codegen import generate
    from conformance.schema.manifest.extract import extract_with_classes
    from reference_impl import codec, io_struct

    if manifest.id != io_struct.MANIFEST_ID or generate(manifest) != _source(Path(io_struct.__file__)):
        return None
    classes = extract_with_classes(io_struct.__name__, union_attr="CUSTOM_MESSAGE_TYPES", array_typecode="q")[1]
    return (classes, lambda obj: codec.encode(obj, "msgpack"),
            lambda data: codec.decode(data, "msgpack", unwrap_wrappers=False))


@lru_cache(maxsize=None)
def _source(path: Path) -> str:
    return path.read_text()
