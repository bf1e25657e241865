"""HTTP request bodies: validation, and turning them into reference structs.

Every body is validated before anything is sent to a scheduler: pydantic models
(unknown keys and wrong types rejected), the io_struct pydantic bridge for
SamplingParams and UpdateWeightsFromTensorReqInput (base64 bytes), then engine
limits. A failure is a RequestError whose ``param`` names the field, e.g.
``sampling_params.temperature`` or ``serialized_named_tensors``; the HTTP layer
turns it into a 4xx JSON error.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from reference_impl.io_struct import SamplingParams, UpdateWeightsFromTensorReqInput

from .sampling import TOP_K_ALL


class RequestError(Exception):
    """A client error: HTTP status, message and the offending field."""

    def __init__(self, message: str, param: Optional[str] = None, status_code: int = 400,
                 err_type: str = "BadRequestError", code: Optional[str] = None) -> None:
        super().__init__(message)
        self.message, self.param, self.status_code, self.err_type = message, param, status_code, err_type
        self.code = code

    def to_json(self) -> dict[str, Any]:
        return {"object": "error", "message": self.message, "type": self.err_type, "param": self.param,
                "code": self.code or self.status_code}


_TYPE_NAMES = {"str", "int", "float", "bool", "list", "dict", "none", "function-after", "function-before",
               "json-or-python", "tagged-union", "union", "nullable"}


def field_path(loc: tuple[Any, ...]) -> str:
    """('sampling_params', 'temperature') -> 'sampling_params.temperature'; ('input_ids', 2) -> 'input_ids[2]'.
    Union-member labels pydantic inserts (e.g. 'list[int]') are dropped."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and ("[" in part or "(" in part or part.lower() in _TYPE_NAMES):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def from_validation_error(exc: ValidationError, prefix: str = "") -> RequestError:
    err = exc.errors()[0]
    path = field_path(tuple(err["loc"]))
    if prefix:
        path = f"{prefix}.{path}" if path and not path.startswith("[") else f"{prefix}{path}"
    where = path or "body"
    return RequestError(f"{where}: {err['msg']}", param=path or None)


def parse_body(model: type[BaseModel], body: bytes) -> Any:
    try:
        return model.model_validate_json(body or b"{}")
    except ValidationError as exc:
        raise from_validation_error(exc) from None


# -- SamplingParams ------------------------------------------------------------------
_sampling_adapter = TypeAdapter(SamplingParams)
FLOAT_PARAMS = ("temperature", "top_p", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty")
# Larger biases only overflow the softmax (OpenAI's range; a bias of +-100 already bans or forces a token).
LOGIT_BIAS_MAX = 100.0
UNSUPPORTED = ("json_schema", "regex", "ebnf", "structural_tag", "beam_width", "stop_regex", "custom_params",
               "watermark")


def sampling_params_from(raw: Optional[dict[str, Any]], vocab_size: int,
                         param: str = "sampling_params") -> SamplingParams:
    """Strict validation through the io_struct pydantic bridge, then engine limits; normalized like upstream."""
    try:
        params = _sampling_adapter.validate_json(json.dumps(raw or {}), strict=True)
    except ValidationError as exc:
        raise from_validation_error(exc, param) from None
    return check_sampling_params(params, vocab_size, param)


def check_sampling_params(params: SamplingParams, vocab_size: int, param: str = "sampling_params") -> SamplingParams:
    def bad(name: str, why: str) -> RequestError:
        where = f"{param}.{name}" if param else name
        return RequestError(f"{where}: {why}", param=where)

    for name in FLOAT_PARAMS:  # JSON admits NaN and Infinity; no sampling maths does
        if not math.isfinite(getattr(params, name)):
            raise bad(name, f"must be a finite number, got {getattr(params, name)!r}")
    if params.temperature < 0:
        raise bad("temperature", "must be >= 0")
    if not 0 < params.top_p <= 1:
        raise bad("top_p", "must be in (0, 1]")
    if params.top_k == -1 or params.top_k >= TOP_K_ALL:
        params.top_k = TOP_K_ALL
    elif params.top_k < 1:
        raise bad("top_k", "must be -1 (all) or >= 1")
    if not 0 <= params.min_p <= 1:
        raise bad("min_p", "must be in [0, 1]")
    if params.max_new_tokens is not None and params.max_new_tokens < 0:
        raise bad("max_new_tokens", "must be >= 0")
    if params.min_new_tokens < 0:
        raise bad("min_new_tokens", "must be >= 0")
    if not 0 < params.repetition_penalty <= 2:
        raise bad("repetition_penalty", "must be in (0, 2]")
    for name in ("frequency_penalty", "presence_penalty"):
        if not -2 <= getattr(params, name) <= 2:
            raise bad(name, "must be in [-2, 2]")
    if params.sampling_seed is not None and not -(1 << 63) <= params.sampling_seed < 1 << 64:
        raise bad("sampling_seed", "must fit in 64 bits")
    if params.n != 1:
        raise bad("n", "only n=1 is supported by the reference engine")
    for name in UNSUPPORTED:
        if getattr(params, name) is not None:
            raise bad(name, "is not supported by the reference engine")
    for token in params.stop_token_ids or ():
        if not 0 <= token < vocab_size:
            raise bad("stop_token_ids", f"token {token} is not in [0, {vocab_size})")
    for key, value in (params.logit_bias or {}).items():
        if not key.isdigit() or not 0 <= int(key) < vocab_size:
            raise bad("logit_bias", f"key {key!r} is not a token id in [0, {vocab_size})")
        if not -LOGIT_BIAS_MAX <= value <= LOGIT_BIAS_MAX:  # NaN fails this too
            raise bad("logit_bias", f"bias {value!r} of token {key} is not in [-{LOGIT_BIAS_MAX}, {LOGIT_BIAS_MAX}]")
    if params.temperature < 1e-6:  # greedy, as upstream normalizes it
        params.temperature, params.top_k = 1.0, 1
    stops = params.stop
    if stops is not None:
        stops = [stops] if isinstance(stops, str) else list(stops)
        if not all(stops):
            raise bad("stop", "stop strings must not be empty")
        params.stop_strs = stops
        params.stop_str_max_len = max((len(s.encode()) for s in stops), default=0)
    params.is_normalized = True
    return params


# -- native API bodies ---------------------------------------------------------------
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class GenerateRequest(_Strict):
    text: Optional[Union[str, list[str]]] = None
    input_ids: Optional[Union[list[int], list[list[int]]]] = None
    sampling_params: Optional[Union[dict[str, Any], list[dict[str, Any]]]] = None
    rid: Optional[Union[str, list[str]]] = None
    stream: bool = False
    return_logprob: bool = False
    logprob_start_len: int = -1
    top_logprobs_num: int = Field(0, ge=0)
    token_ids_logprob: Optional[list[int]] = None
    return_text_in_logprobs: bool = False
    return_hidden_states: bool = False
    routed_dp_rank: Optional[int] = None


class EncodeRequest(_Strict):
    text: Optional[Union[str, list[str]]] = None
    input_ids: Optional[Union[list[int], list[list[int]]]] = None
    rid: Optional[Union[str, list[str]]] = None
    return_pooled_hidden_states: bool = False
    routed_dp_rank: Optional[int] = None


class AbortRequest(_Strict):
    rid: str = ""
    abort_all: bool = False


@dataclass
class GenerateSpec:
    """One generation request, validated: what the tokenizer manager sends."""

    input_ids: list[int]
    input_text: Optional[str]
    sampling_params: SamplingParams
    rid: Optional[str] = None
    stream: bool = False
    return_logprob: bool = False
    logprob_start_len: int = -1
    top_logprobs_num: int = 0
    token_ids_logprob: Optional[list[int]] = None
    return_text_in_logprobs: bool = False
    return_hidden_states: bool = False
    routed_dp_rank: Optional[int] = None


@dataclass
class EncodeSpec:
    input_ids: list[int]
    input_text: Optional[str]
    rid: Optional[str] = None
    return_pooled_hidden_states: bool = False
    routed_dp_rank: Optional[int] = None


def check_input_ids(ids: list[int], vocab_size: int, param: str) -> list[int]:
    if not ids:
        raise RequestError(f"{param}: must not be empty", param=param)
    for i, t in enumerate(ids):
        if not 0 <= t < vocab_size:
            raise RequestError(f"{param}[{i}]: token {t} is not in [0, {vocab_size})", param=f"{param}[{i}]")
    return ids


def _batch(value: Any, n: int, name: str) -> list[Any]:
    """A per-item list for a batch request (a scalar is shared by every item)."""
    if isinstance(value, list):
        if len(value) != n:
            raise RequestError(f"{name}: {len(value)} values for a batch of {n}", param=name)
        return value
    return [value] * n


def _single_rid(rid: Any) -> Optional[str]:
    if isinstance(rid, list):
        raise RequestError("rid: a single request takes one rid (a string), not a list", param="rid")
    single: Optional[str] = rid
    return single


def inputs_of(text: Any, input_ids: Any, tokenizer: Any) -> tuple[list[tuple[list[int], Optional[str]]], bool, str]:
    """[(ids, text)], is_batch, param name. Exactly one of text / input_ids."""
    if (text is None) == (input_ids is None):
        raise RequestError("give exactly one of text and input_ids", param="text")
    if text is not None:
        texts = text if isinstance(text, list) else [text]
        if not texts:
            raise RequestError("text: empty batch", param="text")
        return [(tokenizer.encode(t), t) for t in texts], isinstance(text, list), "text"
    batch = bool(input_ids) and isinstance(input_ids[0], list)
    rows = input_ids if batch else [input_ids]
    if not rows:
        raise RequestError("input_ids: empty batch", param="input_ids")
    return [(list(r), None) for r in rows], batch, "input_ids"


def generate_specs(req: GenerateRequest, tokenizer: Any, vocab_size: int,
                   context_length: int) -> tuple[list[GenerateSpec], bool]:
    items, is_batch, name = inputs_of(req.text, req.input_ids, tokenizer)
    n = len(items)
    if is_batch and req.stream:
        raise RequestError("stream: streaming a batch is not supported; send one request per stream", param="stream")
    raw_params = _batch(req.sampling_params, n, "sampling_params")
    rids = _batch(req.rid, n, "rid") if is_batch else [_single_rid(req.rid)]
    if is_batch and req.rid is not None and len(set(rids)) != n:
        raise RequestError("rid: batch rids must be distinct", param="rid")
    if req.token_ids_logprob is not None:
        check_input_ids(req.token_ids_logprob, vocab_size, "token_ids_logprob")
    if req.top_logprobs_num > vocab_size:
        raise RequestError(f"top_logprobs_num: {req.top_logprobs_num} is more than the vocabulary ({vocab_size})",
                           param="top_logprobs_num")
    specs = []
    for i, ((ids, text), raw) in enumerate(zip(items, raw_params)):
        where = f"{name}[{i}]" if is_batch else name
        check_input_ids(ids, vocab_size, where)
        params = sampling_params_from(raw, vocab_size, f"sampling_params[{i}]" if isinstance(req.sampling_params, list)
                                      else "sampling_params")
        if len(ids) >= context_length:
            raise RequestError(f"{where}: {len(ids)} tokens leave no room in the context of {context_length}",
                               param=where)
        if params.max_new_tokens is not None and len(ids) + params.max_new_tokens > context_length:
            raise RequestError(f"sampling_params.max_new_tokens: {len(ids)} prompt + {params.max_new_tokens} "
                               "new tokens "
                               f"exceed the context length {context_length}", param="sampling_params.max_new_tokens")
        if req.logprob_start_len < -1:
            raise RequestError("logprob_start_len: must be >= -1", param="logprob_start_len")
        specs.append(GenerateSpec(
            input_ids=ids, input_text=text, sampling_params=params, rid=rids[i], stream=req.stream,
            return_logprob=req.return_logprob, logprob_start_len=req.logprob_start_len,
            top_logprobs_num=req.top_logprobs_num if req.return_logprob else 0,
            token_ids_logprob=req.token_ids_logprob if req.return_logprob else None,
            return_text_in_logprobs=req.return_text_in_logprobs, return_hidden_states=req.return_hidden_states,
            routed_dp_rank=req.routed_dp_rank))
    return specs, is_batch


def encode_specs(req: EncodeRequest, tokenizer: Any, vocab_size: int,
                 context_length: int) -> tuple[list[EncodeSpec], bool]:
    items, is_batch, name = inputs_of(req.text, req.input_ids, tokenizer)
    rids = _batch(req.rid, len(items), "rid") if is_batch else [_single_rid(req.rid)]
    if is_batch and req.rid is not None and len(set(rids)) != len(rids):
        raise RequestError("rid: batch rids must be distinct", param="rid")
    specs = []
    for i, (ids, text) in enumerate(items):
        where = f"{name}[{i}]" if is_batch else name
        check_input_ids(ids, vocab_size, where)
        if len(ids) > context_length:
            raise RequestError(f"{where}: {len(ids)} tokens exceed the context length {context_length}", param=where)
        specs.append(EncodeSpec(input_ids=ids, input_text=text, rid=rids[i],
                                return_pooled_hidden_states=req.return_pooled_hidden_states,
                                routed_dp_rank=req.routed_dp_rank))
    return specs, is_batch


# -- control requests ---------------------------------------------------------------
def control_request(struct: type[Any], body: bytes) -> Any:
    """A control message of the catalogue from its JSON body (strict: unknown keys and wrong types
    refused naming the field); rid and http_worker_ipc are the server's, not the client's."""
    try:
        obj = TypeAdapter(struct).validate_json(body or b"{}", strict=True)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    obj.rid = obj.http_worker_ipc = None
    return obj


# -- weight updates ------------------------------------------------------------------
_update_adapter = TypeAdapter(UpdateWeightsFromTensorReqInput)


def update_weights_request(body: bytes,
                           parameter_shapes: Optional[dict[str, tuple[int, ...]]]) -> UpdateWeightsFromTensorReqInput:
    """Validate the JSON (base64 bytes decoded by the pydantic bridge) and the tensors it carries
    (parameter_shapes None: a model without parameters, the stub, whose payloads are opaque:
    never opened, so never unpickled either)."""
    from .weights import check_named_tensors, load_named_tensors

    try:
        obj = _update_adapter.validate_json(body or b"{}", strict=True)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    try:
        for rank in range(len(obj.serialized_named_tensors)):
            if parameter_shapes is not None:
                check_named_tensors(load_named_tensors(obj.serialized_named_tensors, obj.load_format, rank),
                                    parameter_shapes)
        if not obj.serialized_named_tensors:
            raise ValueError("serialized_named_tensors is empty")
    except ValueError as exc:
        param = "load_format" if "load_format" in str(exc) else "serialized_named_tensors"
        raise RequestError(f"{param}: {exc}", param=param) from None
    return obj


# -- OpenAI-compatible bodies --------------------------------------------------------
class _OpenAI(BaseModel):
    # Clients send fields we do not use (user, ...): ignored, but known fields are type-checked.
    model_config = ConfigDict(extra="ignore", strict=True)


class StreamOptions(_OpenAI):
    include_usage: bool = False


class OpenAISamplingRequest(_OpenAI):
    """What completions and chat completions share: the model and the sampling knobs
    (`seed`, `top_k`, `min_p`, `ignore_eos`, `min_tokens` are extensions)."""

    model: str
    temperature: float = Field(1.0, ge=0)
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    stop: Optional[Union[str, list[str]]] = None
    stream: bool = False
    stream_options: Optional[StreamOptions] = None
    n: int = 1
    seed: Optional[int] = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: Optional[dict[str, float]] = None
    ignore_eos: bool = False
    min_tokens: int = 0


class CompletionRequest(OpenAISamplingRequest):
    prompt: Union[str, list[str], list[int], list[list[int]]]
    max_tokens: Optional[int] = Field(16, ge=0)
    logprobs: Optional[int] = Field(None, ge=0, le=20)
    echo: bool = False


class ChatMessage(_OpenAI):
    role: Literal["system", "user", "assistant"]
    content: Union[str, list[dict[str, Any]]]


class ChatCompletionRequest(OpenAISamplingRequest):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: Optional[int] = Field(None, ge=0)
    max_completion_tokens: Optional[int] = Field(None, ge=0)
    logprobs: bool = False
    top_logprobs: Optional[int] = Field(None, ge=0, le=20)


class EmbeddingRequest(_OpenAI):
    model: str
    input: Union[str, list[str], list[int], list[list[int]]]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: Optional[int] = None


def check_model(name: str, served: Optional[str]) -> None:
    if name != served:
        raise RequestError(f"model: the model `{name}` does not exist; this server serves `{served}`",
                           param="model", status_code=404, err_type="NotFoundError", code="model_not_found")


def openai_sampling(req: OpenAISamplingRequest, max_new_tokens: Optional[int],
                    vocab_size: int) -> SamplingParams:
    if req.n != 1:
        raise RequestError("n: only n=1 is supported by the reference engine", param="n")
    raw = {
        "max_new_tokens": max_new_tokens, "temperature": req.temperature, "top_p": req.top_p, "top_k": req.top_k,
        "min_p": req.min_p, "stop": req.stop, "presence_penalty": req.presence_penalty,
        "frequency_penalty": req.frequency_penalty, "logit_bias": req.logit_bias, "ignore_eos": req.ignore_eos,
        "min_new_tokens": req.min_tokens, "sampling_seed": req.seed,
    }
    try:
        return sampling_params_from({k: v for k, v in raw.items() if v is not None}, vocab_size, param="")
    except RequestError as exc:  # name the OpenAI field, not the SamplingParams one
        for ours, theirs in _OPENAI_NAMES.items():
            if exc.param and exc.param.startswith(ours):
                exc.param = theirs + exc.param[len(ours):]
                exc.message = exc.message.replace(ours, theirs, 1)
        raise


_OPENAI_NAMES = {"max_new_tokens": "max_tokens", "min_new_tokens": "min_tokens", "sampling_seed": "seed"}
