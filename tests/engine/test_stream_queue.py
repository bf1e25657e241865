"""The tokenizer manager's stream queue and the HTTP layer's JSON, without processes.

At high concurrency a stream's HTTP handler runs behind the engine: several outputs are queued
before it takes the first. The queue keeps a length into the request's ids, not a copy, so each
chunk must still carry the ids as they were when its own output arrived."""

from __future__ import annotations

import asyncio
import gc
import json
import shutil
from array import array
from pathlib import Path
from typing import Any

import msgspec
import pytest

from reference_impl.engine import checkpoint
from reference_impl.engine.config import EngineConfig, IpcNames
from reference_impl.engine.http_stream import JSONAnswer, sse
from reference_impl.engine.protocol import GenerateSpec
from reference_impl.engine.tokenizer_manager import TokenizerManager
from reference_impl.io_struct import BatchStrOutput, SamplingParams


@pytest.fixture(scope="module")
def manager(tmp_path_factory: pytest.TempPathFactory) -> Any:
    model_dir = checkpoint.write_tiny_checkpoint(tmp_path_factory.mktemp("tiny"))
    ipc = IpcNames.create(1)
    yield TokenizerManager(EngineConfig(model_path=str(model_dir), transport="msgpack").resolved(), ipc)
    shutil.rmtree(ipc.ipc_dir, ignore_errors=True)


def one_row_output(rid: str, text: str, ids: list[int], completion_tokens: int, finished: bool) -> BatchStrOutput:
    """A one-row BatchStrOutput as the detokenizer sends it (unset optional fields None)."""
    given: dict[str, Any] = {
        "rids": [rid], "finished_reasons": [{"type": "length", "length": completion_tokens} if finished else None],
        "output_strs": [text], "output_ids": [array("q", ids)], "prompt_tokens": [3],
        "completion_tokens": [completion_tokens], "reasoning_tokens": [0], "cached_tokens": [0]}
    for field in msgspec.structs.fields(BatchStrOutput):
        if field.name not in given and field.required:
            given[field.name] = None
    return BatchStrOutput(**given)


def test_a_stream_behind_the_engine_gets_each_outputs_own_ids(manager: Any) -> None:
    spec = GenerateSpec(input_ids=[1, 2, 3], input_text=None, sampling_params=SamplingParams(), stream=True)
    state = manager._new_state(None, spec, None, "generate")
    steps = [("a", [10]), ("b", [11, 12]), ("c", [13])]
    for n, (text, ids) in enumerate(steps):  # every output arrives before the handler runs
        manager._handle_str_output(one_row_output(state.rid, text, ids, completion_tokens=n + 1,
                                                  finished=n == len(steps) - 1))

    async def drain() -> list[dict[str, Any]]:
        return [chunk async for chunk in manager._wait(state)]

    chunks = asyncio.run(drain())
    assert [c["text"] for c in chunks] == ["a", "ab", "abc"]
    assert [c["output_ids"] for c in chunks] == [[10], [10, 11, 12], [10, 11, 12, 13]]
    assert [c["meta_info"]["completion_tokens"] for c in chunks] == [1, 2, 3]
    assert state.rid not in manager.states


def test_queued_outputs_are_not_tracked_by_the_collector(manager: Any) -> None:
    """At c=1024 some 165,000 outputs wait queued: a tracked one costs every collection a visit."""
    spec = GenerateSpec(input_ids=[1, 2, 3], input_text=None, sampling_params=SamplingParams(), stream=True)
    state = manager._new_state(None, spec, None, "generate")
    manager._handle_str_output(one_row_output(state.rid, "a", [10], completion_tokens=1, finished=False))
    queued = state.queue.get_nowait()
    gc.collect()  # a young collection would untrack a tuple of untracked items; this one holds a dict
    assert not gc.is_tracked(queued)
    manager.states.pop(state.rid)


def test_answers_are_compact_json_with_non_finite_floats_as_null() -> None:
    answer = {"text": "é ∑", "meta_info": {"output_token_logprobs": [[float("-inf"), 7, None], [-0.5, 8, None]],
                                           "nan": float("nan"), "big": 2**63 - 1}}
    event = sse(answer)
    assert event.startswith(b"data: {") and event.endswith(b"}\n\n")
    body = event[len(b"data: "):-2]
    assert b", " not in body and "é ∑".encode() in body  # compact, UTF-8 (not \\u escapes)
    assert json.loads(body) == {"text": "é ∑", "meta_info": {
        "output_token_logprobs": [[None, 7, None], [-0.5, 8, None]], "nan": None, "big": 2**63 - 1}}
    assert json.loads(JSONAnswer(answer).body) == json.loads(body)
    with pytest.raises(TypeError):
        sse({"not JSON": Path("/")})
