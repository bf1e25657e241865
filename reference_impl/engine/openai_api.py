"""OpenAI-compatible routes on top of the tokenizer manager.

    GET  /v1/models
    POST /v1/completions        prompt (text | ids | batch), logprobs, stream (SSE)
    POST /v1/chat/completions   messages through the byte tokenizer's chat template, logprobs, stream
    POST /v1/embeddings         input (text | ids | batch), float or base64
"""

from __future__ import annotations

import asyncio
import base64
import struct
import time
import uuid
from typing import Any, Optional

from fastapi import FastAPI, Request
from fastapi.responses import Response

from .http_stream import JSONAnswer, collect, first_item, sse, stream_response, unless_disconnected
from .protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    EmbeddingRequest,
    EncodeSpec,
    GenerateSpec,
    RequestError,
    check_input_ids,
    check_model,
    openai_sampling,
    parse_body,
)
from .tokenizer_manager import TokenizerManager
from .tracing import trace_headers


def finish_reason(meta: dict[str, Any]) -> Optional[str]:
    reason = meta.get("finish_reason")
    kind: Optional[str] = None if reason is None else reason.get("type")
    return kind


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def add_openai_routes(app: FastAPI, tm: TokenizerManager) -> None:
    tok = tm.tokenizer
    served = tm.config.served_model_name

    def prompt_ids(prompt: Any) -> list[tuple[list[int], Optional[str]]]:
        if isinstance(prompt, str):
            return [(tok.encode(prompt), prompt)]
        if prompt and all(isinstance(p, str) for p in prompt):
            return [(tok.encode(p), p) for p in prompt]
        if prompt and all(isinstance(p, list) for p in prompt):
            return [(check_input_ids(p, tm.vocab_size, f"prompt[{i}]"), None) for i, p in enumerate(prompt)]
        return [(check_input_ids(list(prompt), tm.vocab_size, "prompt"), None)]

    def fit(ids: list[int], max_tokens: Optional[int], param: str) -> int:
        room = tm.context_length - len(ids)
        if room <= 0:
            raise RequestError(f"{param}: {len(ids)} tokens leave no room in the context of {tm.context_length}",
                               param=param)
        if max_tokens is None:
            return room
        if max_tokens > room:
            raise RequestError(f"max_tokens: {len(ids)} prompt + {max_tokens} tokens exceed the context length "
                               f"{tm.context_length}", param="max_tokens")
        return max_tokens

    def spec(ids: list[int], text: Optional[str], params: Any, *, stream: bool,
             logprobs: Optional[int]) -> GenerateSpec:
        return GenerateSpec(input_ids=ids, input_text=text, sampling_params=params, stream=stream,
                            return_logprob=logprobs is not None, logprob_start_len=-1,
                            top_logprobs_num=logprobs or 0, return_text_in_logprobs=True)

    @app.get("/v1/models")
    async def models() -> Response:
        return JSONAnswer({"object": "list", "data": [
            {"id": served, "object": "model", "created": 0, "owned_by": "ipc-conformance", "root": served,
             "max_model_len": tm.context_length}]})

    # -- completions ---------------------------------------------------------------
    def completion_logprobs(meta: dict[str, Any], start: int, text_offset: int) -> Optional[dict[str, Any]]:
        if "output_token_logprobs" not in meta:
            return None
        tokens: list[str] = []
        lps: list[Optional[float]] = []
        tops: list[dict[str, float]] = []
        offsets: list[int] = []
        top_rows = meta.get("output_top_logprobs")
        for i, (lp, _tid, text) in enumerate(meta["output_token_logprobs"][start:], start):
            tokens.append(text)
            lps.append(lp)
            offsets.append(text_offset)
            text_offset += len(text)
            if top_rows is not None:
                tops.append({t: v for v, _, t in (top_rows[i] or [])})
        return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops if top_rows is not None else None,
                "text_offset": offsets}

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        req = parse_body(CompletionRequest, await request.body())
        check_model(req.model, served)
        if req.echo:
            raise RequestError("echo: not supported by the reference engine", param="echo")
        items = prompt_ids(req.prompt)
        if req.stream and len(items) > 1:
            raise RequestError("prompt: streaming takes one prompt", param="prompt")
        specs: list[GenerateSpec] = []
        for ids, text in items:
            params = openai_sampling(req, fit(ids, req.max_tokens, "prompt"), tm.vocab_size)
            specs.append(spec(ids, text, params, stream=req.stream, logprobs=req.logprobs))
        cid, created, headers = f"cmpl-{uuid.uuid4().hex}", int(time.time()), trace_headers(request.headers)

        def envelope(choices: list[dict[str, Any]], use: Optional[dict[str, int]] = None) -> dict[str, Any]:
            body: dict[str, Any] = {"id": cid, "object": "text_completion", "created": created, "model": served,
                                    "choices": choices}
            if use is not None:
                body["usage"] = use
            return body

        if req.stream:
            agen = tm.generate(specs[0], headers)
            first = await first_item(agen)
            sent: dict[str, Any] = {"text": 0, "tokens": 0, "usage": None}

            def render(out: dict[str, Any]) -> list[bytes]:
                meta = out["meta_info"]
                delta = out["text"][sent["text"]:]
                lp = completion_logprobs(meta, sent["tokens"], sent["text"])
                sent["text"], sent["tokens"] = len(out["text"]), len(out["output_ids"])
                sent["usage"] = usage(meta["prompt_tokens"], meta["completion_tokens"])
                return [sse(envelope([{"index": 0, "text": delta, "logprobs": lp,
                                       "finish_reason": finish_reason(meta)}]))]

            def tail() -> list[bytes]:
                if req.stream_options and req.stream_options.include_usage and sent["usage"]:
                    return [sse(envelope([], sent["usage"]))]
                return []

            return await stream_response(first, agen, render, tail)

        outs = await unless_disconnected(request, asyncio.gather(*(collect(tm.generate(s, headers)) for s in specs)))
        choices = [{"index": i, "text": out["text"], "logprobs": completion_logprobs(out["meta_info"], 0, 0),
                    "finish_reason": finish_reason(out["meta_info"])} for i, out in enumerate(outs)]
        total = usage(sum(o["meta_info"]["prompt_tokens"] for o in outs),
                      sum(o["meta_info"]["completion_tokens"] for o in outs))
        return JSONAnswer(envelope(choices, total))

    # -- chat ----------------------------------------------------------------------
    def chat_prompt(req: ChatCompletionRequest) -> list[int]:
        messages: list[dict[str, Any]] = []
        for i, m in enumerate(req.messages):
            content = m.content
            if isinstance(content, list):
                parts: list[str] = []
                for j, part in enumerate(content):
                    if part.get("type") != "text" or not isinstance(part.get("text"), str):
                        raise RequestError(f"messages[{i}].content[{j}]: only text parts are supported",
                                           param=f"messages[{i}].content[{j}]")
                    parts.append(part["text"])
                content = "".join(parts)
            messages.append({"role": m.role, "content": content})
        return tok.apply_chat_template(messages)

    def chat_logprobs(meta: dict[str, Any], start: int) -> Optional[dict[str, Any]]:
        if "output_token_logprobs" not in meta:
            return None
        top_rows = meta.get("output_top_logprobs")
        content: list[dict[str, Any]] = []
        for i, (lp, tid, text) in enumerate(meta["output_token_logprobs"][start:], start):
            entry: dict[str, Any] = {"token": text, "logprob": lp, "bytes": tok.token_bytes(tid), "top_logprobs": []}
            if top_rows is not None and top_rows[i]:
                entry["top_logprobs"] = [{"token": t, "logprob": v, "bytes": tok.token_bytes(t_id)}
                                         for v, t_id, t in top_rows[i]]
            content.append(entry)
        return {"content": content}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        req = parse_body(ChatCompletionRequest, await request.body())
        check_model(req.model, served)
        ids = chat_prompt(req)
        max_tokens = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
        params = openai_sampling(req, fit(ids, max_tokens, "messages"), tm.vocab_size)
        params.stop_token_ids = set(params.stop_token_ids or ()) | {tok.end_token_id}
        top = (req.top_logprobs or 0) if req.logprobs else None
        gen = spec(ids, None, params, stream=req.stream, logprobs=top)
        cid, created, headers = f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), trace_headers(request.headers)

        def envelope(obj: str, choices: list[dict[str, Any]], use: Optional[dict[str, int]] = None) -> dict[str, Any]:
            body: dict[str, Any] = {"id": cid, "object": obj, "created": created, "model": served, "choices": choices}
            if use is not None:
                body["usage"] = use
            return body

        if req.stream:
            agen = tm.generate(gen, headers)
            first = await first_item(agen)
            sent: dict[str, Any] = {"text": 0, "tokens": 0, "usage": None, "role": False}

            def render(out: dict[str, Any]) -> list[bytes]:
                meta = out["meta_info"]
                chunks: list[bytes] = []
                if not sent["role"]:
                    sent["role"] = True
                    chunks.append(sse(envelope("chat.completion.chunk", [
                        {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                         "finish_reason": None}])))
                delta = out["text"][sent["text"]:]
                lp = chat_logprobs(meta, sent["tokens"])
                sent["text"], sent["tokens"] = len(out["text"]), len(out["output_ids"])
                sent["usage"] = usage(meta["prompt_tokens"], meta["completion_tokens"])
                chunks.append(sse(envelope("chat.completion.chunk", [
                    {"index": 0, "delta": {"content": delta} if delta else {}, "logprobs": lp,
                     "finish_reason": finish_reason(meta)}])))
                return chunks

            def tail() -> list[bytes]:
                if req.stream_options and req.stream_options.include_usage and sent["usage"]:
                    return [sse(envelope("chat.completion.chunk", [], sent["usage"]))]
                return []

            return await stream_response(first, agen, render, tail)

        out = await unless_disconnected(request, collect(tm.generate(gen, headers)))
        meta = out["meta_info"]
        return JSONAnswer(envelope("chat.completion", [{
            "index": 0, "message": {"role": "assistant", "content": out["text"]},
            "logprobs": chat_logprobs(meta, 0), "finish_reason": finish_reason(meta)}],
            usage(meta["prompt_tokens"], meta["completion_tokens"])))

    # -- embeddings ----------------------------------------------------------------
    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> Response:
        req = parse_body(EmbeddingRequest, await request.body())
        check_model(req.model, served)
        if req.dimensions is not None:
            raise RequestError("dimensions: not supported by the reference engine", param="dimensions")
        items = prompt_ids(req.input)
        for i, (ids, _) in enumerate(items):
            if len(ids) > tm.context_length:
                raise RequestError(f"input[{i}]: {len(ids)} tokens exceed the context length {tm.context_length}",
                                   param="input")
        headers = trace_headers(request.headers)
        outs = await unless_disconnected(request, asyncio.gather(
            *(tm.encode(EncodeSpec(input_ids=ids, input_text=text), headers) for ids, text in items)))

        def vector(values: list[float]) -> Any:
            if req.encoding_format == "base64":
                return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()
            return values

        prompt = sum(o["meta_info"]["prompt_tokens"] for o in outs)
        return JSONAnswer({"object": "list", "model": served,
                             "data": [{"object": "embedding", "index": i, "embedding": vector(o["embedding"])}
                                      for i, o in enumerate(outs)],
                             "usage": {"prompt_tokens": prompt, "total_tokens": prompt}})

