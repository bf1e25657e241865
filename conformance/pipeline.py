"""Differential pipeline runs (capability ``pipeline``, checks ``Required.Pipeline.*``, SPEC §16).

The codec checks prove what an implementation's encoder and decoder do with values the suite
chooses. A pipeline run proves what its *own pipeline* does with real traffic: one scenario of
HTTP requests driven through every hop's own code (its HTTP app, tokenizer manager send,
data-parallel controller, scheduler receive and output building, detokenizer, output handler),
every process boundary a real ZeroMQ socket, with only the model's forward replaced by a
deterministic stub that records what it produced. The same scenario runs under each transport,
chosen the way users choose it, and in several topologies. No check names a defect class; the
oracles are:

- identity: every consumer-visible result is the same in every run (responses field by field,
  and what each scheduler rank received, attribute by attribute);
- conservation: what the client sent reaches the scheduler, and what the stub produced reaches
  the client (lost under both transports alike is still lost);
- exactly once: every message sent towards a process arrives there, once; every request reaches
  exactly one scheduler rank once;
- transport: every frame on every socket is of the transport the run selected;
- liveness: no hop dies, no request goes unanswered within the bound.

An adapter runs one (transport, topology) with ``Adapter.run_pipeline`` and returns the run's
record (``PipelineRun``); this module holds the scenario, the topologies and the judging.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import math
from typing import Any, Mapping, Optional, Sequence

#: A process's bound, per run it makes: generous (a run imports the engine, builds its processes
#: and answers a few dozen requests in seconds), so only a hang reaches it.
RUN_TIMEOUT_S = 120.0
#: One request's bound inside a run; a request not answered by then is a liveness failure.
REQUEST_TIMEOUT_S = 30.0
#: Above the 64 MiB a receiving socket may be capped at ("hardening" options): SPEC R-PIPE-4.
LARGE_MESSAGE_BYTES = 64 * 1024 * 1024 + 4096


@dataclasses.dataclass(frozen=True)
class Topology:
    """How the processes are laid out, and how the run selects its transport. ``switch``
    is the spelling of the user's choice (an implementation maps it to its own variable or flag:
    SGLang's SGLANG_USE_PICKLE_IPC takes "1"/"true" and "0"/"false")."""

    name: str
    dp_size: int = 1
    load_balance_method: str = "round_robin"
    tokenizer_workers: int = 1  #: several: the multi-tokenizer mode (its router splits outputs per worker)
    embedding: bool = False  #: an embedding model: the encode scenario
    switch: str = "plain"  #: "plain": 1 / 0; "word": true / false
    large: bool = False  #: also send a message above 64 MiB (single-rank topologies)

    def as_config(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


TOPOLOGIES: tuple[Topology, ...] = (
    Topology("dp1", large=True),
    Topology("dp2-round_robin", dp_size=2, switch="word"),
    Topology("dp2-total_requests", dp_size=2, load_balance_method="total_requests"),
    Topology("dp2-total_tokens", dp_size=2, load_balance_method="total_tokens", switch="word"),
    Topology("tokenizers2", tokenizer_workers=2, switch="word"),
    Topology("embed", embedding=True, switch="word"),
    Topology("embed-tokenizers2", embedding=True, tokenizer_workers=2),
)
#: The topology every other run is compared with.
BASELINE = TOPOLOGIES[0].name


def baseline_of(topology: Topology) -> Topology:
    """The single-rank, single-worker run of the same model kind: what a topology must equal."""
    return next(t for t in TOPOLOGIES if t.embedding == topology.embedding)


def switch_value(topology: Topology, transport: str) -> str:
    pickle_on = transport == "pickle"
    if topology.switch == "word":
        return "true" if pickle_on else "false"
    return "1" if pickle_on else "0"


GREEDY = {"temperature": 0.0}


def scenario(topology: Topology) -> list[dict[str, Any]]:
    """What real traffic sends, in order: generate plain and by token ids, logprobs of every
    shape, hidden states, a batch, streams, a cache flush, a weight update by tensor over HTTP
    base64 (single-rank topologies: engines refuse it with data parallelism) and, where the
    topology asks, one above 64 MiB. Every request names its rid, so runs compare by rid."""

    def gen(name: str, **body: Any) -> dict[str, Any]:
        body.setdefault("sampling_params", {**GREEDY, "max_new_tokens": 5})
        return {"name": name, "path": "/generate", "body": body}

    if topology.embedding:
        return embedding_scenario()
    steps = [
        gen("plain", rid="plain", text="The quick brown fox"),
        gen("input_ids", rid="input_ids", input_ids=[72, 105, 33], sampling_params={**GREEDY, "max_new_tokens": 3}),
        gen("logprobs", rid="logprobs", text="Hello", return_logprob=True, logprob_start_len=0, top_logprobs_num=2,
            token_ids_logprob=[65, 97]),
        gen("logprobs_output_only", rid="logprobs_output_only", text="Hi", return_logprob=True),
        gen("hidden_states", rid="hidden_states", text="hi", return_hidden_states=True),
        gen("batch", rid=["batch-0", "batch-1", "batch-2"], text=["a", "bb", "ccc"]),
        gen("batch_logprobs", rid=["batch_lp-0", "batch_lp-1"], text=["x", "yy"], return_logprob=True,
            logprob_start_len=0, top_logprobs_num=1),
        gen("stream", rid="stream", text="Once upon", stream=True),
        gen("stream_logprobs", rid="stream_logprobs", text="Stream", stream=True, return_logprob=True,
            top_logprobs_num=1),
        control("flush_cache", "/flush_cache", {}, "FlushCacheReqInput"),
        control("open_session", "/open_session", {"capacity_of_str_len": 1024, "session_id": "session-1"},
                "OpenSessionReqInput"),
        control("close_session", "/close_session", {"session_id": "session-1"}, "CloseSessionReqInput"),
        control("pause_generation", "/pause_generation", {"mode": "in_place"}, "PauseGenerationReqInput"),
        control("continue_generation", "/continue_generation", {}, "ContinueGenerationReqInput"),
    ]
    if topology.dp_size == 1:
        steps.append(weights_step("update_weights", weight_payload(1024)))
    if topology.large:
        steps.append(weights_step("large_message", weight_payload(LARGE_MESSAGE_BYTES)))
    return steps


#: The engine's own Python API (what ``Engine.encode`` calls): answers with tensors, which no
#: JSON carries (pooled hidden states).
ENGINE_ENCODE = "engine:encode"


def embedding_scenario() -> list[dict[str, Any]]:
    """Embeddings over HTTP, and pooled hidden states through the engine's API: one request
    (a single pooled state), a batch of equal shapes (stacked on the wire), token ids."""
    return [
        {"name": "encode", "path": "/encode", "body": {"rid": "encode", "text": "hello world"}},
        {"name": "encode_batch", "path": "/encode",
         "body": {"rid": ["encode_b-0", "encode_b-1"], "text": ["ab", "cde"]}},
        {"name": "encode_ids", "path": "/encode", "body": {"rid": "encode_ids", "input_ids": [72, 105, 33]}},
        {"name": "pooled_one", "path": ENGINE_ENCODE,
         "body": {"rid": "pooled_one", "text": "xyz", "return_pooled_hidden_states": True}},
        {"name": "pooled_batch", "path": ENGINE_ENCODE,
         "body": {"rid": ["pooled_b-0", "pooled_b-1", "pooled_b-2"], "text": ["a", "bb", "ccc"],
                  "return_pooled_hidden_states": True}},
        control("flush_cache", "/flush_cache", {}, "FlushCacheReqInput"),
    ]


def control(name: str, path: str, body: dict[str, Any], message: str) -> dict[str, Any]:
    """A control request: the tokenizer manager sends ``message`` on, and every scheduler rank
    must receive it once."""
    return {"name": name, "path": path, "body": body, "control": message}


def weight_payload(size: int) -> bytes:
    """Serialized-tensor bytes of a given size: not base64 text and not a pickle, so no engine
    decodes them on the way (their digest must reach the scheduler unchanged)."""
    unit = bytes(range(256))
    return (unit * (size // 256 + 1))[:size]


def weights_step(name: str, payload: bytes) -> dict[str, Any]:
    return {"name": name, "path": "/update_weights_from_tensor",
            "body": {"serialized_named_tensors": [base64.b64encode(payload).decode()], "flush_cache": False},
            "sent_bytes": [{"$bytes": len(payload), "sha256": hashlib.sha256(payload).hexdigest()[:16]}]}


# -- a run's record ------------------------------------------------------------------------
@dataclasses.dataclass
class PipelineRun:
    """What one run of the scenario did (the adapter's run_pipeline returns it)."""

    transport: str  #: what the run asked for
    topology: Topology
    selected: str = ""  #: the transport the implementation says it selected
    hops: dict[str, str] = dataclasses.field(default_factory=dict)  #: hop -> which of its own code ran
    not_driven: dict[str, str] = dataclasses.field(default_factory=dict)  #: hop -> why not
    responses: dict[str, Any] = dataclasses.field(default_factory=dict)  #: step name -> status + body/chunks
    received: list[dict[str, Any]] = dataclasses.field(default_factory=list)  #: what scheduler ranks received
    produced: dict[str, Any] = dataclasses.field(default_factory=dict)  #: rid -> what the stub model produced
    links: dict[str, Any] = dataclasses.field(default_factory=dict)  #: receiving process -> frames
    errors: list[str] = dataclasses.field(default_factory=list)  #: hops that died, runs that did not finish
    seconds: float = 0.0
    #: why the implementation has no such topology (no multi-tokenizer mode, no embedding model):
    #: the run's checks skip, naming it
    unsupported: str = ""


#: Response fields that differ between any two runs: clocks, ids, routes.
VOLATILE_KEYS = frozenset({"e2e_latency", "response_sent_to_client_ts", "dp_rank", "created", "id",
                           "queue_time", "prefill_launch_delay", "prefill_launch_latency", "prefill_finished_ts",
                           "inference_time", "decode_throughput", "request_received_ts", "first_token_time"})


def comparable(value: Any) -> Any:
    """A response less what differs between any two runs (the keys above, at any depth); a
    stream by its last chunk and its end (how many chunks carry the output is timing)."""
    if isinstance(value, dict) and "chunks" in value:
        chunks = value["chunks"]
        return {"status": value.get("status"), "last": comparable(_final_bodies(value)),
                "done": bool(chunks) and chunks[-1] == "[DONE]"}
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value


def differences(expected: Any, got: Any, path: str = "$", limit: int = 12) -> list[str]:
    """Where two JSON values differ, as 'path: expected X, got Y' lines."""
    out: list[str] = []

    def walk(a: Any, b: Any, at: str) -> None:
        if len(out) >= limit:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=str):
                if key not in b:
                    out.append(f"{at}.{key}: expected {_short(a[key])}, got nothing")
                elif key not in a:
                    out.append(f"{at}.{key}: expected nothing, got {_short(b[key])}")
                else:
                    walk(a[key], b[key], f"{at}.{key}")
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{at}[{i}]")
        elif not _same(a, b):
            out.append(f"{at}: expected {_short(a)}, got {_short(b)}")

    walk(expected, got, path)
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


# -- the oracles ------------------------------------------------------------------------------
def liveness_failures(run: PipelineRun) -> list[str]:
    lines = [f"died: {error.strip().splitlines()[-1] if error.strip() else error}" for error in run.errors]
    for name, answer in run.responses.items():
        if "$error" in answer:
            lines.append(f"{name}: {answer['$error']}")
        elif answer.get("status") != 200:
            lines.append(f"{name}: HTTP {answer.get('status')}: {_short(answer.get('body'))}")
    return lines


def transport_failures(run: PipelineRun) -> list[str]:
    lines = []
    if run.selected != run.transport:
        lines.append(f"the run asked for {run.transport} ({_switch_note(run)}); the implementation selected "
                     f"{run.selected or 'nothing it would name'}")
    for process, link in sorted(run.links.items()):
        other = [kind for kind in link["kinds"] if kind != run.transport]
        if other:
            lines.append(f"{process}: received {', '.join(other)} frame(s) in a {run.transport} run")
    return lines


def _switch_note(run: PipelineRun) -> str:
    return f"switch spelled {switch_value(run.topology, run.transport)!r}"


def delivery_failures(run: PipelineRun) -> list[str]:
    """Every frame sent towards a process arrived there; every request reached one rank once."""
    lines = []
    for process, link in sorted(run.links.items()):
        if link["sent"] and link["sent"] != link["frames"]:
            lines.append(f"{process}: {link['sent']} frame(s) sent towards it, {link['frames']} received")
    counts: dict[str, int] = {}
    for item in run.received:
        if item.get("rid") is not None and item["type"].startswith("Tokenized"):
            counts[item["rid"]] = counts.get(item["rid"], 0) + 1
    for rid in expected_rids(run.topology):
        if counts.get(rid, 0) != 1:
            lines.append(f"request {rid!r} reached the scheduler ranks {counts.get(rid, 0)} time(s), not once")
    for step in scenario(run.topology):
        if "control" not in step:
            continue
        for rank in range(run.topology.dp_size):
            got = sum(1 for item in run.received if item["type"] == step["control"] and item.get("rank") == rank)
            if got != 1:
                lines.append(f"{step['name']}: scheduler rank {rank} received {step['control']} {got} time(s), "
                             "not once")
    return lines


def expected_rids(topology: Topology) -> list[str]:
    rids: list[str] = []
    for step in scenario(topology):
        rid = step["body"].get("rid")
        rids += rid if isinstance(rid, list) else [rid] if rid is not None else []
    return rids


def conservation_failures(run: PipelineRun) -> list[str]:
    """The stub's record against what the client got, and the client's payloads against what
    the scheduler received."""
    lines: list[str] = []
    for name, answer in run.responses.items():
        bodies = _final_bodies(answer)
        for body in bodies:
            rid = (body.get("meta_info") or {}).get("id")
            made = run.produced.get(rid) if rid is not None else None
            if made is None:
                continue
            lines += [f"{name}: {line}" for line in _kept(body, made)]
    sent = {step["name"]: step.get("sent_bytes") for step in scenario(run.topology) if step.get("sent_bytes")}
    weights = [item for item in run.received if item["type"] == "UpdateWeightsFromTensorReqInput"]
    for (name, payloads), item in zip(sent.items(), weights):
        got = item["form"].get("serialized_named_tensors")
        if got != payloads:
            lines.append(f"{name}: the client sent serialized_named_tensors {payloads}, the scheduler received {got}")
    if len(weights) < len(sent):
        lines.append(f"{len(sent)} weight update(s) sent, {len(weights)} reached the scheduler")
    return lines


def _final_bodies(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The complete answer of each request of a step: the body (one per request of a batch),
    or a stream's last chunk (each chunk carries the output so far)."""
    body = answer.get("body")
    if isinstance(body, list):
        return [b for b in body if isinstance(b, dict)]
    if isinstance(body, dict):
        return [body]
    chunks = [c for c in answer.get("chunks", []) if isinstance(c, dict)]
    return chunks[-1:]


def _kept(body: dict[str, Any], made: Mapping[str, Any]) -> list[str]:
    lines = []
    meta = body.get("meta_info") or {}
    if "embedding" in made and body.get("embedding") != made["embedding"]:
        lines.append(f"embedding: the model produced {_short(made['embedding'])}, the client got "
                     f"{_short(body.get('embedding'))}")
    if made.get("pooled") is not None and body.get("pooled_hidden_state") != made["pooled"]:
        lines.append(f"pooled_hidden_state: the model produced {_short(made['pooled'])}, the client got "
                     f"{_short(body.get('pooled_hidden_state'))}")
    if body.get("output_ids") is not None and body["output_ids"] != made.get("tokens"):
        lines.append(f"output_ids: the model produced {made['tokens']}, the client got {body['output_ids']}")
    if made.get("customized") and meta.get("expert_ids") != made["customized"]:
        lines.append(f"meta_info.expert_ids (customized info): the model produced {_short(made['customized'])}, "
                     f"the client got {_short(meta.get('expert_ids'))}")
    if made.get("hidden_states") and _hidden(meta) != made["hidden_states"]:
        lines.append(f"meta_info.hidden_states: the model produced {_short(made['hidden_states'])}, "
                     f"the client got {_short(meta.get('hidden_states'))}")
    if made.get("output_logprobs") and "output_token_logprobs" in meta:
        got = [_json_float(entry[0]) for entry in meta["output_token_logprobs"]]
        want = [_json_float(v) for v in made["output_logprobs"]]
        if got != want:
            lines.append(f"meta_info.output_token_logprobs: the model produced {want}, the client got {got}")
    return lines


def _hidden(meta: Mapping[str, Any]) -> Optional[list[Any]]:
    states = meta.get("hidden_states")
    return list(states) if isinstance(states, list) else states


def _json_float(value: Any) -> Any:
    """A float as JSON carries it: non-finite values have no JSON form (null), the stub records
    them as their repr."""
    if isinstance(value, str) and value in ("-inf", "inf", "nan"):
        return None
    return value


#: What a scheduler receives that its topology decides: the data-parallel controller stamps its
#: own time stats on the requests it routes.
TOPOLOGY_FIELDS = frozenset({"time_stats"})


def identity_failures(baseline: PipelineRun, run: PipelineRun) -> list[str]:
    """Consumer-visible results of run against the baseline run: responses, then what the
    scheduler ranks received (by rid; the route a request took is not compared, nor, between
    topologies, what the topology itself decides)."""
    lines: list[str] = []
    skip = TOPOLOGY_FIELDS if baseline.topology != run.topology else frozenset()
    for name in sorted(set(baseline.responses) & set(run.responses)):
        lines += [f"{name}: {line}" for line in differences(comparable(baseline.responses[name]),
                                                              comparable(run.responses[name]), "$")]
    mine, theirs = _by_rid(baseline.received, skip), _by_rid(run.received, skip)
    for rid in sorted(set(mine) & set(theirs)):
        lines += [f"scheduler received {rid}: {line}" for line in differences(mine[rid], theirs[rid], "$")]
    return lines


def _by_rid(received: Sequence[Mapping[str, Any]], skip: frozenset[str]) -> dict[str, Any]:
    return {item["rid"]: {k: v for k, v in item["form"].items() if k not in skip}
            for item in received if isinstance(item.get("rid"), str)}
