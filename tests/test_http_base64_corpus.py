"""The HttpBase64 Corpus checks (SPEC R-HTTP-3) catch the two base64 bugs SGLang's bridge can have,
planted into the reference's bridge: a decode without validation (characters outside the alphabet
skipped) and a base64 decode in pydantic's JSON mode only (a FastAPI server validates the parsed
body in Python mode, where the text then arrives as its own UTF-8 bytes). The reference itself
passes every case, in both modes, and the rule is RFC 4648's, not CPython's."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from pydantic_core import core_schema

from conformance.runtime import http_bridge
from conformance.session import Session
from conformance.suite import test_http_base64 as checks

STRUCTS = ("UpdateWeightsFromTensorReqInput", "LoadLoRAAdapterFromTensorsReqInput")


@pytest.fixture(scope="module")
def ipc() -> Session:
    return Session()


def _differences(ipc: Session, struct: str, mode: str) -> list[str]:
    try:
        checks.test_http_base64_corpus(ipc, struct, mode)
    except AssertionError as exc:
        return list(exc.ipc_failure.differences)  # type: ignore[attr-defined]
    return []


@pytest.mark.parametrize("mode", sorted(checks.MODES))
@pytest.mark.parametrize("struct", STRUCTS)
def test_the_reference_passes_every_case(ipc, struct, mode):
    assert _differences(ipc, struct, mode) == []


def test_the_pattern_is_rfc_4648_and_stricter_than_cpython():
    for text, raw in checks.VALID.values():
        assert http_bridge.STRICT_BASE64.fullmatch(text) and base64.b64decode(text) == raw
        assert base64.b64encode(raw).decode() == text  # the corpus's valid texts are canonical
    for name, value in checks.INVALID.items():
        assert not (isinstance(value, str) and http_bridge.STRICT_BASE64.fullmatch(value)), name
    assert base64.b64decode("QUJD=", validate=True) == b"ABC"  # why the bridge matches the pattern first


def test_a_lenient_decode_fails_both_modes(ipc, monkeypatch):
    original = http_bridge._from_base64

    def lenient(value: Any) -> Any:  # SGLang's Base64Bytes._decode_value without validate=True
        return base64.b64decode(value) if isinstance(value, str) else original(value)

    monkeypatch.setattr(http_bridge, "_from_base64", lenient)
    for mode in checks.MODES:
        wrong = _differences(ipc, "UpdateWeightsFromTensorReqInput", mode)
        named = {line.split("(")[1].split(")")[0] for line in wrong}
        assert {"OutsideAlphabet", "InnerSpace", "InnerNewline", "UrlSafeDash", "TrailingNewline"} <= named, wrong
        assert all(line.startswith("$.serialized_named_tensors[1] <- ") for line in wrong), wrong


def test_a_json_mode_only_bridge_fails_python_mode_only(ipc, monkeypatch):
    def json_only(marker: Any, source_type: Any, handler: Any) -> Any:
        inner = handler(source_type)
        return core_schema.json_or_python_schema(
            json_schema=core_schema.no_info_before_validator_function(http_bridge._from_base64, inner),
            python_schema=inner)

    monkeypatch.setattr(http_bridge.Base64Bytes, "__get_pydantic_core_schema__", json_only)
    for struct in STRUCTS:
        assert _differences(ipc, struct, "json") == []
        wrong = _differences(ipc, struct, "python")
        assert "$.serialized_named_tensors[1] <- 'QUJD' (ThreeBytes): decoded to [b'QQ==', b'QUJD'], " \
               "expected [b'A', b'ABC']" in wrong, wrong


def test_a_failure_names_struct_field_mode_and_input(ipc, monkeypatch):
    monkeypatch.setattr(http_bridge, "STRICT_BASE64", http_bridge.re.compile(r".*", http_bridge.re.S))
    with pytest.raises(AssertionError) as caught:
        checks.test_http_base64_corpus(ipc, "LoadLoRAAdapterFromTensorsReqInput", "python")
    message = str(caught.value)
    first = message.splitlines()[0]
    assert first.startswith("LoadLoRAAdapterFromTensorsReqInput: base64 in HTTP JSON judged wrongly by "
                            "validate_http_python"), first
    assert "$.serialized_named_tensors[1] <- 'QUJD=' (ExtraPadding): accepted as [b'A', b'ABC']" in first
    assert "requirement: SPEC R-HTTP-3" in message and "input: JSON {" in message
