"""`manifest extract --source`: catalogues read from source with ast, never imported, equal to
what import mode extracts."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest

from conformance.cli import main
from conformance.schema.codegen import generate
from conformance.schema.manifest import Default, Manifest, bundled_manifests, load_manifest, wire_manifests
from conformance.schema.manifest.extract import extract
from conformance.schema.manifest.source import SourceError, extract_source

BUNDLED = bundled_manifests()


def _comparable(manifest: Manifest, *, modules: bool = True) -> dict:
    data = msgspec.to_builtins(manifest)
    data.pop("extracted_with")  # provenance: every comparison ignores it
    if not modules:
        data["module"] = "-"
        for spec in [*data["structs"].values(), *data["enums"].values()]:
            spec["module"] = "-"
    return data


@pytest.mark.parametrize("manifest_id", wire_manifests())  # codegen writes msgspec structs
def test_codegen_source_extracts_back_to_its_manifest(manifest_id, tmp_path):
    """codegen writes one module for a catalogue that upstream spreads over several files, and
    names its union CUSTOM_MESSAGE_TYPES: the structs' modules are the only difference."""
    manifest = load_manifest(manifest_id)
    path = tmp_path / "io_struct.py"
    path.write_text(generate(manifest))
    back = extract_source(path, union_attr="CUSTOM_MESSAGE_TYPES", version=manifest.version,
                          implementation=manifest.implementation)
    assert back.extracted_with["source"] == "static"
    assert _comparable(back, modules=False) == _comparable(manifest, modules=False)


def _wheels() -> Path:
    folder = os.environ.get("IPC_SGLANG_WHEELS")
    if not folder:
        pytest.skip("set IPC_SGLANG_WHEELS to a folder of sglang-X-*.whl to check every bundled release's source")
    return Path(folder)


@pytest.mark.parametrize("manifest_id", [m for m in BUNDLED if m.startswith("sglang-")])
def test_wheel_source_equals_bundled_manifest(manifest_id):
    version = manifest_id.split("-", 1)[1]
    wheels = sorted(_wheels().glob(f"sglang-{version}-*.whl"))
    if not wheels:
        pytest.skip(f"no sglang-{version}-*.whl in IPC_SGLANG_WHEELS")
    extracted = extract_source(wheels[0])
    assert extracted.version == version  # read from the wheel
    assert _comparable(extracted) == _comparable(load_manifest(manifest_id))


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


FORK = {
    "fork/__init__.py": "",
    "fork/version.py": "__version__ = '1.2.3'\n",
    # a module of the tree that needs packages a CPU machine does not have
    "fork/kernels.py": """
        import sgl_kernel
        import triton
        from enum import IntEnum

        class Modality(IntEnum):
            IMAGE = 1
            VIDEO = 2

        def fast(x):
            return sgl_kernel.run(x)
    """,
    "fork/params.py": """
        import msgspec

        class SamplingParams(msgspec.Struct, array_like=True, omit_defaults=True):
            top_k: int = 1 << 30
            stop: "list[str] | None" = None
    """,
    "fork/io_struct.py": """
        from __future__ import annotations

        from array import array
        from typing import Dict, List, Optional

        import msgspec

        from .kernels import Modality, fast
        from fork.params import SamplingParams

        TokenIds = List[int]

        class BaseReq(msgspec.Struct, tag=True, kw_only=True, array_like=True):
            rid: Optional[str] = None

        class GenerateReq(BaseReq, kw_only=True):
            input_ids: array[int]
            params: SamplingParams = msgspec.field(default_factory=SamplingParams)
            modality: Modality = Modality.IMAGE
            extra: Dict[str, int] = {}
            ids: TokenIds = msgspec.field(name="i", default_factory=list)
            include: List[str] = msgspec.field(default_factory=lambda: ["all"])  # a literal: a value
            nonce: str = msgspec.field(default_factory=lambda: str(object()))  # made at construction

        class AbortReq(BaseReq, kw_only=True):
            abort_all: bool = False

        _all_types = tuple(BaseReq.__subclasses__()) + (int, float, bool, bytes)
    """,
}


def test_tree_with_cuda_only_imports_extracts(tmp_path):
    root = _tree(tmp_path, FORK)
    manifest = extract_source(root / "fork" / "io_struct.py")
    assert (manifest.id, manifest.module) == ("fork-1.2.3", "fork.io_struct")
    assert manifest.union == ["AbortReq", "GenerateReq", "int", "float", "bool", "bytes"]
    gen = manifest.structs["GenerateReq"]
    assert [f.name for f in gen.fields] == ["rid", "input_ids", "params", "modality", "extra", "ids", "include",
                                            "nonce"]
    assert gen.field("input_ids").type == "Array[q]"
    assert gen.field("params").default.factory == "SamplingParams"
    assert gen.field("modality").default.value == "IMAGE" and manifest.enums["Modality"].base == "IntEnum"
    assert gen.field("extra").default.factory == "dict"  # msgspec turns `= {}` into a factory
    assert (gen.field("ids").type, gen.field("ids").encode_name) == ("List[int]", "i")
    params = manifest.structs["SamplingParams"]
    assert params.module == "fork.params" and params.role == "nested"
    assert params.field("top_k").default.value == 1 << 30
    assert params.field("stop").type == "Optional[List[str]]"
    assert params.options == {"array_like": True, "eq": True, "gc": True, "kw_only": False, "omit_defaults": True}
    assert manifest.structs["BaseReq"].role == "base" and gen.tag == "GenerateReq"
    # the same tree from its package directory, and with a struct left out of the union
    assert _comparable(extract_source(root / "fork", module="fork.io_struct")) == _comparable(manifest)
    assert "AbortReq" not in extract_source(root / "fork" / "io_struct.py", exclude=["AbortReq"]).structs


def test_array_int_under_future_annotations_extracts_by_import_and_from_source(tmp_path, monkeypatch):
    """`array[int]` is valid under `from __future__ import annotations` whatever the Python;
    array.array is subscriptable only from 3.12."""
    files = {k: v for k, v in FORK.items() if k != "fork/kernels.py"}
    files["fork/io_struct.py"] = "\n".join(line for line in files["fork/io_struct.py"].splitlines()
                                          if "Modality" not in line)
    root = _tree(tmp_path, files)
    monkeypatch.syspath_prepend(str(root))
    for name in [m for m in sys.modules if m == "fork" or m.startswith("fork.")]:
        monkeypatch.delitem(sys.modules, name)
    by_import = extract("fork.io_struct", version="1.2.3")
    from_source = extract_source(root / "fork" / "io_struct.py")
    assert by_import.structs["GenerateReq"].field("input_ids").type == "Array[q]"
    assert by_import.structs["GenerateReq"].field("include").default == Default("value", value=["all"])
    assert by_import.structs["GenerateReq"].field("nonce").default == Default("factory", factory="opaque")
    assert _comparable(from_source) == _comparable(by_import)


BAD = {
    "fork/__init__.py": "",
    "fork/io_struct.py": """
        import msgspec
        from fork.helpers import make_type

        class BaseReq(msgspec.Struct, tag=True, kw_only=True):
            pass

        class Weird(BaseReq, kw_only=True):
            payload: make_type(int)
    """,
    "fork/helpers.py": "def make_type(t):\n    return t\n",
}


def test_unresolvable_expression_names_struct_field_and_expression(tmp_path, capsys):
    root = _tree(tmp_path, BAD)
    with pytest.raises(SourceError, match=r"Weird\.payload: cannot read the type `make_type\(int\)` statically"):
        extract_source(root / "fork" / "io_struct.py")
    assert main(["manifest", "extract", str(root / "fork" / "io_struct.py")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Weird.payload" in err and "make_type(int)" in err


def test_name_from_outside_the_tree_is_refused_by_name(tmp_path):
    files = dict(BAD, **{"fork/io_struct.py": BAD["fork/io_struct.py"].replace(
        "from fork.helpers import make_type", "from vendor_pkg import Blob").replace("make_type(int)", "Blob")})
    root = _tree(tmp_path, files)
    with pytest.raises(SourceError, match=r"Weird\.payload: unsupported type `Blob` \(vendor_pkg\.Blob"):
        extract_source(root / "fork" / "io_struct.py")


def test_cli_reads_a_path_and_writes_the_manifest(tmp_path, capsys):
    root = _tree(tmp_path, FORK)
    out = tmp_path / "fork.json"
    assert main(["manifest", "extract", str(root / "fork" / "io_struct.py"), "-o", str(out)]) == 0
    assert load_manifest(out).id == "fork-1.2.3"
    assert main(["manifest", "extract", "--source", str(tmp_path / "missing.py")]) == 2
    assert capsys.readouterr().err.strip().endswith("missing.py: no such file or directory")


def test_dataclass_catalogue_from_source_equals_import_mode():
    """The dataclass era (sent with pickle): same messages, roles and opaque-type notes."""
    fixtures = Path(__file__).resolve().parent / "fixtures"
    sys.path.insert(0, str(fixtures))
    try:
        by_import = extract("dataclass_io_struct", implementation="dataclass-fork", version="0.4.0")
    finally:
        sys.path.remove(str(fixtures))
    from_source = extract_source(fixtures / "dataclass_io_struct.py", implementation="dataclass-fork",
                                 version="0.4.0")
    assert _comparable(from_source) == _comparable(by_import)
