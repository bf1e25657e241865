"""The HttpBase64 Corpus checks against the real SGLang bridge (run in `tox -e upstream`): SGLang
0.5.23 passes every case but one (it takes "QUJD=", listed in its expected failures), and each of
the two bugs planted into SGLang's own code fails them: `Base64Bytes._decode_value` without
`validate=True`, and `msgspec_struct_pydantic_core_schema` whose Python-mode arm (what FastAPI
runs on a parsed body) is built from the bare field types, so base64 decodes in JSON mode only."""

from __future__ import annotations

import base64
import typing
from typing import Any

import pytest

from conformance.session import Session
from conformance.suite import test_http_base64 as checks

pytest.importorskip("sglang.srt.managers.io_struct", reason="needs SGLang: tox -e upstream")
pytestmark = pytest.mark.sglang

STRUCTS = ("UpdateWeightsFromTensorReqInput", "LoadLoRAAdapterFromTensorsReqInput")
KNOWN = "$.serialized_named_tensors[1] <- 'QUJD=' (ExtraPadding): accepted as [b'A', b'ABC']"


@pytest.fixture(scope="module")
def ipc() -> Session:
    return Session(impl="sglang")


def _differences(ipc: Session, struct: str, mode: str) -> list[str]:
    try:
        checks.test_http_base64_corpus(ipc, struct, mode)
    except AssertionError as exc:
        return list(exc.ipc_failure.differences)  # type: ignore[attr-defined]
    return []


@pytest.mark.parametrize("mode", sorted(checks.MODES))
@pytest.mark.parametrize("struct", STRUCTS)
def test_sglang_fails_only_the_padding_after_a_whole_quantum(ipc, struct, mode):
    wrong = _differences(ipc, struct, mode)
    assert len(wrong) == 1 and wrong[0].startswith(KNOWN), wrong


def test_decode_without_validation_fails_both_modes(ipc, monkeypatch):
    from sglang.srt.utils import msgspec_utils

    def lenient(cls: type, value: Any) -> Any:
        if isinstance(value, str):
            return base64.b64decode(value)
        if isinstance(value, list):
            return [cls._decode_value(item) for item in value]  # type: ignore[attr-defined]
        return value

    monkeypatch.setattr(msgspec_utils.Base64Bytes, "_decode_value", classmethod(lenient))
    for struct in STRUCTS:
        for mode in checks.MODES:
            named = {line.split("(")[1].split(")")[0] for line in _differences(ipc, struct, mode)}
            assert {"OutsideAlphabet", "InnerSpace", "UrlSafeDash", "TrailingNewline"} <= named, (struct, mode)


def test_base64_in_json_mode_only_fails_python_mode(ipc, monkeypatch):
    import msgspec
    from pydantic_core import core_schema
    from sglang.srt.managers import io_struct

    original = io_struct.msgspec_struct_pydantic_core_schema

    def json_mode_only(cls: type, handler: Any) -> Any:
        full = original(cls, handler)
        fields = {}
        for f in msgspec.structs.fields(cls):
            bare = typing.get_args(f.type)[0] if typing.get_origin(f.type) is typing.Annotated else f.type
            schema = handler.generate_schema(bare)
            if f.default is not msgspec.NODEFAULT:
                schema = core_schema.with_default_schema(schema, default=f.default)
            elif f.default_factory is not msgspec.NODEFAULT:
                schema = core_schema.with_default_schema(schema, default_factory=f.default_factory)
            fields[f.name] = core_schema.typed_dict_field(schema, required=f.required)
        python = core_schema.no_info_after_validator_function(lambda v: cls(**v), core_schema.typed_dict_schema(fields))
        return core_schema.json_or_python_schema(json_schema=full["json_schema"], python_schema=python)

    monkeypatch.setattr(io_struct, "msgspec_struct_pydantic_core_schema", json_mode_only)
    for struct in STRUCTS:
        assert _differences(ipc, struct, "json")[0].startswith(KNOWN)
        wrong = _differences(ipc, struct, "python")
        assert "$.serialized_named_tensors[1] <- 'QUJD' (ThreeBytes): decoded to [b'QQ==', b'QUJD'], " \
               "expected [b'A', b'ABC']" in wrong, wrong
