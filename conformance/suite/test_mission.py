"""Mission areas: the places the pickle -> msgpack migration broke (BRIEF section 4)."""

from __future__ import annotations

import json
import pickle
import types

import msgspec
import pytest
import torch

from conformance.compare import differences
from conformance.http_json import to_http_json
from conformance.plugin import check, harness_error
from conformance.suite.capability import require


def _structs_with_field(ipc, predicate):
    return [s.name for s in ipc.manifest.messages if any(predicate(f) for f in s.fields)]


def _wrapper_fields(spec):
    return [f.name for f in spec.fields if f.type in ("PickleWrapper", "Optional[PickleWrapper]")]


# -- HTTP JSON with base64 bytes (defect class 1) ------------------------------------
def _base64_structs(ipc):
    return _structs_with_field(ipc, lambda f: "base64" in f.annotations)


@check("HttpBase64", per=("struct",), name="Decodes", cases={"struct": _base64_structs})
def test_http_base64_decodes(ipc, struct):
    require(ipc, "http")
    expected = ipc.instance(struct, "typical")
    got = ipc.adapter.validate_http(struct, json.dumps(to_http_json(expected)))
    diffs = differences(expected, got)
    assert not diffs, f"HTTP JSON for {struct} validated to a different struct:\n  " + "\n  ".join(diffs[:10])


@check("HttpBase64", per=("struct",), name="RejectsMalformed", cases={"struct": _base64_structs})
def test_http_base64_rejects_malformed(ipc, struct):
    require(ipc, "http")
    payload = to_http_json(ipc.instance(struct, "typical"))
    field = next(f.name for f in ipc.manifest.structs[struct].fields if "base64" in f.annotations)
    payload[field] = ["not base64!"] if isinstance(payload[field], list) else "not base64!"
    with pytest.raises(Exception) as caught:
        ipc.adapter.validate_http(struct, json.dumps(payload))
    assert field in str(caught.value), f"the error does not name the field {field}: {caught.value}"


# -- nested None logprobs (defect class 3) -------------------------------------------
TOKEN_VALUES = "Optional[List[Optional[List[Optional[float]]]]]"
TOKEN_INDICES = "Optional[List[Optional[List[Optional[int]]]]]"
TOP_VALUES = "Optional[List[Optional[List[Optional[List[float]]]]]]"
TOP_INDICES = "Optional[List[Optional[List[Optional[List[int]]]]]]"
LOGPROB_SHAPES = {  # the review thread's examples, and a batch mixing None and lists
    "absent": None,
    "prompt": [[None, -0.1832, -2.9417, -0.0048]],
    "batch": [[None, -0.42, -1.87], [None, -3.12, -0.09, -5.44]],
    "stream_chunk": [[]],
    "multi_item": [[-0.77, -2.35, -0.18]],
    "mixed_batch": [None, [None, -0.5], []],
}


def _as(shape, leaf):
    if shape is None:
        return None
    return [None if row is None else [None if x is None else leaf(x) for x in row] for row in shape]


def _top(shape, leaf):
    if shape is None:
        return None
    return [None if row is None else [None if x is None else [leaf(x), leaf(x - 1)] for x in row] for row in shape]


def _logprob_values(type_text, shape):
    base = LOGPROB_SHAPES[shape]
    return {
        TOKEN_VALUES: lambda: _as(base, float),
        TOKEN_INDICES: lambda: _as(base, lambda x: int(x * -100)),
        TOP_VALUES: lambda: _top(base, float),
        TOP_INDICES: lambda: _top(base, lambda x: int(x * -100)),
    }[type_text]()


def _logprob_structs(ipc):
    return _structs_with_field(ipc, lambda f: f.type in (TOKEN_VALUES, TOKEN_INDICES, TOP_VALUES, TOP_INDICES))


@check("Logprobs", per=("struct", "shape", "transport"), name="NestedNone",
       cases={"struct": _logprob_structs, "shape": lambda ipc: list(LOGPROB_SHAPES)})
def test_nested_none_logprobs(ipc, struct, shape, transport):
    value = ipc.instance(struct, "minimal")  # only the logprob fields carry data
    for field in ipc.manifest.structs[struct].fields:
        if field.type in (TOKEN_VALUES, TOKEN_INDICES, TOP_VALUES, TOP_INDICES):
            setattr(value, field.name, _logprob_values(field.type, shape))
    decoded = ipc.adapter.decode(ipc.adapter.encode(value, transport), transport)
    diffs = differences(value, decoded)
    assert not diffs, f"{struct} logprobs ({shape}) changed over {transport}:\n  " + "\n  ".join(diffs[:10])


# -- tensors (defect class 7) ----------------------------------------------------------
TENSOR_FIELD = "Optional[List[Optional[Tensor]]]"


def _tensor_cases():
    def dtype(name, shape=(2, 3)):
        return lambda: torch.arange(6).reshape(shape).to(getattr(torch, name))

    cases = {name: dtype(name) for name in ("float32", "float16", "bfloat16", "int64", "bool")}
    cases |= {name: dtype(name) for name in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, name)}
    cases |= {
        "zero_dim": lambda: torch.tensor(-0.0, dtype=torch.bfloat16),
        "empty": lambda: torch.zeros((0, 4), dtype=torch.float32),
        "non_contiguous": lambda: torch.arange(12.0).reshape(3, 4).t(),
        # Contiguous by torch's rule (a size-1 dimension's stride does not count), yet the last
        # stride is 2: a byte view of 2-byte elements refuses it.
        "size1_last_dim_strided": lambda: torch.arange(2.0).reshape(1, 2).to(torch.bfloat16).t(),
        "sliced_view": lambda: torch.arange(20.0)[5:11].reshape(2, 3),
        "requires_grad": lambda: torch.ones(3, requires_grad=True) * 2,
        "cuda": lambda: torch.arange(6.0, device="cuda") if torch.cuda.is_available() else pytest.skip("no GPU"),
    }
    return cases


TENSOR_CASES = _tensor_cases()


def _tensor_carrier(ipc):
    for spec in ipc.manifest.messages:
        for field in spec.fields:
            if field.type == TENSOR_FIELD:
                return spec.name, field.name
    pytest.skip(f"no message of {ipc.manifest.id} has a {TENSOR_FIELD} field")


def _send_tensor(ipc, case, transport):
    struct, field = _tensor_carrier(ipc)
    value = ipc.instance(struct, "typical")
    setattr(value, field, [TENSOR_CASES[case](), None])
    return value, ipc.adapter.decode(ipc.adapter.encode(value, transport), transport), field


@check("Tensor", per=("case", "transport"), name="Exact", cases={"case": lambda ipc: list(TENSOR_CASES)})
def test_tensor(ipc, case, transport):
    sent, got, field = _send_tensor(ipc, case, transport)
    expected = getattr(sent, field)[0].detach()  # gradients never travel (spec normalization)
    diffs = differences([expected, None], getattr(got, field))
    assert not diffs, f"tensor {case} changed over {transport}:\n  " + "\n  ".join(diffs)


@check("Tensor", per=("case",), name="SameOnBothTransports", cases={"case": lambda ipc: list(TENSOR_CASES)})
def test_tensor_cross_transport(ipc, case):
    if len(ipc.transports) < 2:
        pytest.skip("needs both transports")
    got = [getattr(*_send_tensor(ipc, case, t)[1:]) for t in ("pickle", "msgpack")]
    diffs = differences(*got)
    assert not diffs, f"tensor {case} differs between pickle and msgpack:\n  " + "\n  ".join(diffs)


# -- PickleWrapper receive paths, tracing (defect classes 2, 4) --------------------------
TRACE = {
    "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "tracestate": "vendor=opaque",
}


def _opaque_structs(ipc):
    return [s.name for s in ipc.manifest.messages if _wrapper_fields(s)]


def _no_wrapper_left(value, path="$"):
    if type(value).__name__ == "PickleWrapper":
        return [path]
    if isinstance(value, msgspec.Struct):
        return [p for n in value.__struct_fields__ for p in _no_wrapper_left(getattr(value, n), f"{path}.{n}")]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in _no_wrapper_left(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _no_wrapper_left(v, f"{path}[{k!r}]")]
    return []


def _hop(ipc, obj, transport):
    """One process boundary: the sender wraps, the trusted receiver decodes and unwraps."""
    return ipc.adapter.unwrap(ipc.adapter.decode(ipc.adapter.encode(ipc.adapter.wrap(obj), transport), transport))


@check("Unwrap", per=("struct", "transport"), name="NoWrapperLeft", cases={"struct": _opaque_structs})
def test_receive_path_unwraps(ipc, struct, transport):
    require(ipc, "unwrap")
    value = ipc.instance(struct, "typical")
    fields = _wrapper_fields(ipc.manifest.structs[struct])
    for name in fields:
        setattr(value, name, {"created": 1.5, "field": name})
    got = _hop(ipc, value, transport)
    left = _no_wrapper_left(got)
    assert not left, f"a receive path handed on PickleWrappers at {left} ({transport})"
    for name in fields:
        assert getattr(got, name) == {"created": 1.5, "field": name}, f"{struct}.{name} did not survive"


@check("Trace", per=("struct", "transport"), name="ContextSurvivesForwarding", cases={"struct": _opaque_structs})
def test_trace_context_survives_forwarding(ipc, struct, transport):
    """tokenizer -> data-parallel controller -> scheduler: two hops, a re-wrap between them."""
    require(ipc, "unwrap")
    field = _wrapper_fields(ipc.manifest.structs[struct])[0]
    value = ipc.instance(struct, "typical")
    setattr(value, field, {"trace_context": dict(TRACE), "created": 1.5})
    forwarded = _hop(ipc, _hop(ipc, value, transport), transport)
    got = getattr(forwarded, field)
    assert isinstance(got, dict) and got.get("trace_context") == TRACE, (
        f"trace context lost over two {transport} hops: {type(got).__name__} {got!r:.200}")


class _Tripwire:
    """Unpickling this creates a file: proof that wire bytes reached pickle.loads."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _security_payload(ipc, case, marker):
    wrapper_cls = ipc.classes["PickleWrapper"]
    evil = wrapper_cls(data=pickle.dumps(_Tripwire(marker)))
    if case == "top_level":
        return evil
    struct = next(iter(_opaque_structs(ipc)), None)
    if struct is None:
        pytest.skip("no message with a PickleWrapper field")
    value = ipc.instance(struct, "typical")
    setattr(value, _wrapper_fields(ipc.manifest.structs[struct])[0], evil)
    return value


# R-PW-5 is a MUST: a receive path that unpickles wire bytes fails the run.
@check("Security", per=("case",), name="NoPickleFromUntrustedPeer",
       cases={"case": lambda ipc: ["top_level", "field"]})
def test_no_pickle_from_untrusted_peer(ipc, case, tmp_path):
    require(ipc, "receive")
    marker = tmp_path / "pickle-ran"
    data = ipc.adapter.encode(_security_payload(ipc, case, marker), "msgpack")
    try:
        ipc.adapter.receive(data, "msgpack")
    except Exception as exc:
        if harness_error(exc):
            raise  # a crash or a hang is no refusal
        # refusing the message is the right answer
    assert not marker.exists(), "msgpack receive path unpickled bytes from an untrusted peer (remote code execution)"


# -- struct discovery (defect class 8) -------------------------------------------------
@check("Catalogue", per=(), name="LateGrandchildDecodes")
def test_late_grandchild_decodes(ipc, ipc_check_id):
    """A subclass of a message, defined after start-up, is a grandchild of the request base."""
    require(ipc, "define")
    parent_name = next(s.name for s in ipc.manifest.messages if s.base and ipc.manifest.structs[s.base].role == "base")
    parent = ipc.classes[parent_name]
    late = types.new_class(f"Late{parent_name}", (parent,), {"kw_only": True})
    late.__module__, globals()[late.__name__] = __name__, late  # so pickle can find it by name
    value = ipc.instance(parent_name, "typical")
    child = late(**{name: getattr(value, name) for name in value.__struct_fields__})
    for transport in ipc.transports:
        got = ipc.adapter.decode(ipc.adapter.encode(child, transport), transport)
        assert type(got).__name__ == late.__name__ and not differences(child, got), (
            f"a late-defined grandchild {late.__name__} did not decode over {transport}")
