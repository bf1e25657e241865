"""Logprobs with None at every level of nesting (the shapes SGLang sends for prompts, batches,
stream chunks and multi-item requests) arrive as they were sent, on either transport."""

from __future__ import annotations

from typing import Any

from conformance.compare import differences
from conformance.plugin import check
from conformance.suite.failure import Failure, raise_failure, round_trip_step
from conformance.suite.fields import structs_with_field

TOKEN_VALUES = "Optional[List[Optional[List[Optional[float]]]]]"
TOKEN_INDICES = "Optional[List[Optional[List[Optional[int]]]]]"
TOP_VALUES = "Optional[List[Optional[List[Optional[List[float]]]]]]"
TOP_INDICES = "Optional[List[Optional[List[Optional[List[int]]]]]]"
LOGPROB_SHAPES: dict[str, Any] = {  # prompt, batch, stream and multi-item shapes, and a batch mixing None and lists
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
    return structs_with_field(ipc, lambda f: f.type in (TOKEN_VALUES, TOKEN_INDICES, TOP_VALUES, TOP_INDICES))


@check("Logprobs", per=("struct", "shape", "transport"), name="NestedNone",
       cases={"struct": _logprob_structs, "shape": lambda ipc: list(LOGPROB_SHAPES)})
def test_nested_none_logprobs(ipc, struct, shape, transport):
    value = ipc.instance(struct, "minimal")  # only the logprob fields carry data
    for field in ipc.manifest.structs[struct].fields:
        if field.type in (TOKEN_VALUES, TOKEN_INDICES, TOP_VALUES, TOP_INDICES):
            setattr(value, field.name, _logprob_values(field.type, shape))
    data = ipc.adapter.encode(value, transport)
    diffs = differences(value, ipc.adapter.decode(data, transport))
    if diffs:
        raise_failure(Failure(f"{struct} logprobs ({shape}) changed over {transport}", "R-NONE-1",
                              round_trip_step(ipc, value, data, transport), diffs, data, value), ipc)
