"""The pydantic bridge (conformance.runtime.http_bridge, which reference_impl re-exports): HTTP JSON
validates into msgspec structs, bytes fields marked Base64Bytes arrive as base64 text (defect class:
http-base64)."""

from __future__ import annotations

import array
import base64
import json

import msgspec
import pytest
from pydantic import TypeAdapter, ValidationError

from reference_impl import codec, io_struct

WEIGHTS = TypeAdapter(io_struct.UpdateWeightsFromTensorReqInput)
ALL_BYTES = bytes(range(256))


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def error_locs(exc: ValidationError) -> list[tuple]:
    return [tuple(e["loc"]) for e in exc.errors()]


# -- base64 bytes --------------------------------------------------------------------
def test_base64_strings_become_raw_bytes():
    doc = {"rid": "r1", "serialized_named_tensors": [b64(b"hello"), "", b64(ALL_BYTES)], "flush_cache": False}
    got = WEIGHTS.validate_json(json.dumps(doc))
    assert type(got) is io_struct.UpdateWeightsFromTensorReqInput
    assert got.serialized_named_tensors == [b"hello", b"", ALL_BYTES]
    assert all(type(b) is bytes for b in got.serialized_named_tensors)
    assert (got.rid, got.flush_cache, got.load_format, got.selector) == ("r1", False, None, "all")


def test_base64_input_survives_the_wire():
    got = WEIGHTS.validate_json(json.dumps({"serialized_named_tensors": [b64(ALL_BYTES)], "weight_version": "v3"}))
    for transport in ("msgpack", "pickle"):
        assert codec.decode(codec.encode(got, transport), transport) == got


def test_lora_tensors_are_base64_too():
    doc = {"lora_name": "a", "config_dict": {"r": 8, "alpha": [1.5, None]},
           "serialized_named_tensors": [b64(b"\x00\x01")]}
    got = TypeAdapter(io_struct.LoadLoRAAdapterFromTensorsReqInput).validate_json(json.dumps(doc))
    assert got.serialized_named_tensors == [b"\x00\x01"]
    assert got.config_dict == {"r": 8, "alpha": [1.5, None]}


@pytest.mark.parametrize("bad", [
    ["aGVsbG8"],        # missing padding
    ["!!!!"],           # not in the alphabet
    ["aGVs bG8="],      # whitespace
    [b64(b"ok"), "%%"],  # the second item
    ["aGVsbG8-"],       # url-safe alphabet is not base64
    [5],                # not a string
    b64(b"a list was expected"),
], ids=["padding", "alphabet", "whitespace", "second-item", "url-safe", "number", "not-a-list"])
def test_malformed_base64_names_the_field(bad):
    with pytest.raises(ValidationError) as info:
        WEIGHTS.validate_json(json.dumps({"serialized_named_tensors": bad}))
    assert "serialized_named_tensors" in str(info.value)
    assert all(loc[0] == "serialized_named_tensors" for loc in error_locs(info.value))


def test_python_bytes_pass_through_unchanged():
    got = WEIGHTS.validate_python({"serialized_named_tensors": [b"raw \xff bytes"]})
    assert got.serialized_named_tensors == [b"raw \xff bytes"]


# -- keys ----------------------------------------------------------------------------
def test_unknown_keys_are_rejected():
    with pytest.raises(ValidationError) as info:
        WEIGHTS.validate_json(json.dumps({"serialized_named_tensors": [], "bogus": 1}))
    assert error_locs(info.value) == [("bogus",)]
    assert info.value.errors()[0]["type"] == "extra_forbidden"


def test_required_field_missing():
    with pytest.raises(ValidationError) as info:
        WEIGHTS.validate_json("{}")
    assert error_locs(info.value) == [("serialized_named_tensors",)]
    assert info.value.errors()[0]["type"] == "missing"


def test_wrong_scalar_type_and_literal():
    with pytest.raises(ValidationError) as info:
        WEIGHTS.validate_json(json.dumps({"serialized_named_tensors": [], "flush_cache": "maybe", "selector": "nope"}))
    assert sorted(error_locs(info.value)) == [("flush_cache",), ("selector",)]


# -- nested structs, enums, sets -----------------------------------------------------
GENERATE = TypeAdapter(io_struct.TokenizedGenerateReqInput)


def _generate_doc(**sampling):
    return {
        "rid": "g1", "input_text": "hi", "input_ids": None, "input_embeds": [[0.5, -1.0]], "mm_inputs": None,
        "token_type_ids": None, "sampling_params": {"max_new_tokens": 7, "stop": ["</s>"], "stop_token_ids": [3, 3, 4],
                                                    "watermark": {"enabled": True, "key": "k"}, **sampling},
        "return_logprob": True, "logprob_start_len": -1, "top_logprobs_num": 2, "token_ids_logprob": None,
        "stream": False, "session_params": {"id": "s", "rid": "r"},
    }


def test_nested_struct_fields_validate_from_json():
    got = GENERATE.validate_json(json.dumps(_generate_doc()))
    sp = got.sampling_params
    assert type(sp) is io_struct.SamplingParams
    assert (sp.max_new_tokens, sp.stop, sp.stop_token_ids, sp.temperature) == (7, ["</s>"], {3, 4}, 1.0)
    assert sp.watermark == io_struct.WatermarkRequestConfig(enabled=True, key="k")
    assert type(got.session_params) is io_struct.SessionParams and got.session_params.id == "s"
    assert got.input_embeds == [[0.5, -1.0]]
    assert codec.decode(codec.encode(got)) == got  # and the validated struct travels


@pytest.mark.parametrize("sampling, loc", [
    ({"temperature": "hot"}, ("sampling_params", "temperature")),
    ({"bogus": 1}, ("sampling_params", "bogus")),
    ({"watermark": {"enabled": True, "colour": "red"}}, ("sampling_params", "watermark", "colour")),
    ({"stop_token_ids": ["x"]}, ("sampling_params", "stop_token_ids", 0)),
])
def test_nested_errors_have_full_locations(sampling, loc):
    with pytest.raises(ValidationError) as info:
        GENERATE.validate_json(json.dumps(_generate_doc(**sampling)))
    assert loc in error_locs(info.value)


def test_nested_struct_list():
    abort = TypeAdapter(io_struct.AbortReq)
    ok = abort.validate_json('{"rid": "x", "weight_versions": [{"version": "v1", "start": 0, "end": 3}]}')
    assert ok.weight_versions == [io_struct.WeightVersionSpan(version="v1", start=0, end=3)]
    with pytest.raises(ValidationError) as info:
        abort.validate_json('{"weight_versions": [{"version": "v1", "start": "zero", "end": 3}]}')
    assert error_locs(info.value) == [("weight_versions", 0, "start")]


def test_enum_and_literal_fields():
    profile = TypeAdapter(io_struct.ProfileReq).validate_json('{"req_type": 2}')
    assert profile.req_type is io_struct.ProfileReqType.STOP_PROFILE
    assert TypeAdapter(io_struct.BeginWeightUpdateReqInput).validate_json('{"selector": "draft"}').selector == "draft"
    with pytest.raises(ValidationError):
        TypeAdapter(io_struct.ProfileReq).validate_json('{"req_type": 9}')


def test_validate_python_passes_an_instance_through():
    inst = io_struct.UpdateWeightsFromTensorReqInput(serialized_named_tensors=[b"x"])
    assert WEIGHTS.validate_python(inst) is inst
    req = GENERATE.validate_json(json.dumps(_generate_doc()))
    assert GENERATE.validate_python(req) is req
    built = TypeAdapter(io_struct.AbortReq).validate_python({"rid": "p", "abort_all": True})
    assert built == io_struct.AbortReq(rid="p", abort_all=True)


def _all_structs():
    return sorted((t for t in vars(io_struct).values() if isinstance(t, type) and issubclass(t, msgspec.Struct)),
                  key=lambda t: t.__name__)


@pytest.mark.parametrize("cls", _all_structs(), ids=lambda t: t.__name__)
def test_every_struct_has_a_pydantic_schema(cls):
    TypeAdapter(cls)  # must not raise PydanticSchemaGenerationError


def test_every_message_type_has_a_pydantic_schema():
    for cls in codec.message_types():
        if cls.__module__ == io_struct.__name__:
            TypeAdapter(cls)


def test_json_list_for_an_array_field_is_converted_or_refused_at_the_edge():
    doc = _generate_doc()
    doc["input_ids"] = [1, 2, 3]
    try:
        got = GENERATE.validate_json(json.dumps(doc))
    except ValidationError:
        return  # refusing it at the HTTP edge is fine
    arrived = codec.decode(codec.encode(got))
    assert isinstance(arrived.input_ids, array.array) and list(arrived.input_ids) == [1, 2, 3]
