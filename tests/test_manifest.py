"""Manifest: type expressions, extraction (discovery, errors), and the committed files."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import msgspec
import pytest

from conformance.errors import UsageError
from conformance.schema.manifest import TypeExprError, load_manifest, parse, render
from conformance.schema.manifest.extract import UnsupportedTypeError, extract

SGLANG = load_manifest("sglang-0.5.23")
ALL_TYPES = sorted({f.type for s in SGLANG.structs.values() for f in s.fields})


@pytest.mark.parametrize("text", ALL_TYPES)
def test_every_manifest_type_renders_back_identically(text):
    assert render(parse(text)) == text


@pytest.mark.parametrize(
    "text, kind",
    [
        ("Optional[List[Optional[List[Optional[float]]]]]", "Union"),
        ("Tuple[int, ...]", "Union"),  # wrapped below
        ("Array[q]", "Array"),
        ("Literal[\"a\", 1, true, null]", "Literal"),
        ("Tuple[()]", "Tuple"),
    ],
)
def test_parse_shapes(text, kind):
    node = parse(text if kind != "Union" or text.startswith("Optional") else f"Optional[{text}]")
    assert node.kind == kind


def test_optional_is_union_with_none():
    assert parse("Optional[Union[int, str]]") == parse("Union[int, str, None]")


@pytest.mark.parametrize("bad", ["List[int", "Dict[str]", "int]", "Optional", "List[int,]x", "Frob[int]x"])
def test_malformed_type_expressions_are_rejected(bad):
    with pytest.raises(TypeExprError):
        parse(bad)


def _write_module(tmp_path, monkeypatch, name: str, source: str) -> str:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)
    return name


CATALOGUE = """
    import enum
    from typing import Optional, List
    import msgspec

    class Colour(enum.Enum):
        RED = 1
        BLUE = 2

    class Inner(msgspec.Struct, array_like=True):
        colour: Colour
        tags: List[str] = []

    class Base(msgspec.Struct, tag=True, kw_only=True, array_like=True):
        rid: Optional[str] = None

    class Child(Base, kw_only=True):
        inner: Optional[Inner] = None

    class GrandChild(Child, kw_only=True):
        depth: int = 2

    class Custom(msgspec.Struct, tag=True, array_like=True):
        value: float = 0.0

    _all_types = (Child, Custom, int, bytes)
"""


def test_extract_walks_grandchildren_custom_types_and_field_types(tmp_path, monkeypatch):
    module = _write_module(tmp_path, monkeypatch, "catalogue_sample", CATALOGUE)
    manifest = extract(module, roots=["Base"])
    assert {s.name for s in manifest.messages} == {"Child", "GrandChild", "Custom"}
    assert manifest.structs["Base"].role == "base"
    assert manifest.structs["Inner"].role == "nested"
    assert manifest.enums["Colour"].members == {"RED": 1, "BLUE": 2}
    grand = manifest.structs["GrandChild"]
    assert [f.name for f in grand.fields] == ["rid", "inner", "depth"]
    assert grand.base == "Child" and grand.tag == "GrandChild" and grand.options["array_like"]
    assert manifest.structs["Inner"].field("tags").default.kind == "factory"
    assert manifest.union == ["Child", "Custom", "GrandChild", "int", "bytes"]


def test_unsupported_type_names_struct_field_and_type(tmp_path, monkeypatch):
    module = _write_module(tmp_path, monkeypatch, "bad_catalogue", """
        import msgspec

        class Widget:
            pass

        class Req(msgspec.Struct, tag=True, array_like=True):
            ok: int = 0
            widget: Widget = None
    """)
    with pytest.raises(UnsupportedTypeError, match=r"Req\.widget: unsupported type .*Widget"):
        extract(module)


def test_cli_extract_reports_unsupported_type(tmp_path):
    (tmp_path / "cli_bad.py").write_text(textwrap.dedent("""
        import msgspec
        class Widget: pass
        class Req(msgspec.Struct, tag=True, array_like=True):
            widget: Widget
    """))
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "manifest", "extract", "cli_bad"],
        cwd=tmp_path, capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path), "PATH": ""},
    )
    assert proc.returncode == 2
    assert "Req.widget: unsupported type" in proc.stderr


def test_manifest_file_round_trips():
    again = msgspec.json.decode(SGLANG.to_json(), type=type(SGLANG))
    assert again == SGLANG


def test_sglang_manifest_covers_the_catalogue():
    assert len(SGLANG.messages) == 101  # 100 BaseReq/BaseBatchReq subclasses + KvMetrics
    for name in ("PickleWrapper", "SamplingParams", "SessionParams", "LoRARef", "KvMetrics"):
        assert name in SGLANG.structs
    rids = SGLANG.structs["BaseBatchReq"].field("rids")
    assert rids.type == "Optional[List[str]]"
    tensor_input = SGLANG.structs["UpdateWeightsFromTensorReqInput"].field("serialized_named_tensors")
    assert tensor_input.annotations == ["base64"]
    assert SGLANG.structs["BatchTokenIDOutput"].field("decode_ids").type == "List[Array[q]]"


def test_unknown_manifest_id_lists_the_bundled_ones():
    with pytest.raises(UsageError, match="sglang-0.5.23"):
        load_manifest("nope-1.0")
