"""The HTTP server (FastAPI): SGLang-native routes; OpenAI-compatible ones are in openai_api.py.

    POST /generate                   text | input_ids, sampling_params, stream (SSE), logprobs, hidden states
    POST /encode                     embeddings (pooled hidden state tensor on the IPC path)
    POST /update_weights_from_tensor base64 safetensors payloads, applied in every scheduler
    GET|POST /flush_cache            POST /abort_request
    GET /health                      200 healthy, 503 when a child process died
    GET /health_generate             one greedy token through the whole pipeline
    GET /get_server_info             transport, dp size, device, pids, ...
    GET /get_model_info

Bodies are parsed by protocol.py; client errors are 4xx JSON naming the field and
never reach a scheduler; engine failures are 5xx JSON.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from contextlib import asynccontextmanager
from typing import AsyncIterator, Callable, Optional

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reference_impl.io_struct import (
    CloseSessionReqInput,
    ContinueGenerationReqInput,
    OpenSessionReqInput,
    PauseGenerationReqInput,
)

from . import protocol
from .http_stream import (
    ClientGone,
    JSONAnswer,
    collect,
    error_response,
    first_item,
    sse,
    stream_response,
    unless_disconnected,
)
from .openai_api import add_openai_routes
from .protocol import AbortRequest, EncodeRequest, GenerateRequest, RequestError, parse_body
from .tokenizer_manager import EngineError, TokenizerManager
from .tracing import trace_headers

logger = logging.getLogger(__name__)


class BodyLimit:
    """ASGI middleware: request bodies over max_bytes are refused with 413 before they are read
    whole (by Content-Length when declared, else while streaming in)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    def error(self) -> RequestError:
        return RequestError(f"body: request body larger than the server's limit of {self.max_bytes} bytes "
                            "(--max-request-bytes)", param="body", status_code=413, err_type="RequestTooLargeError")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            response = error_response(self.error())
            response.headers["connection"] = "close"
            return await response(scope, receive, send)
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise self.error()  # answered by the RequestError handler as a 413
            return message

        await self.app(scope, limited, send)


class HTTPServer(uvicorn.Server):
    """uvicorn's server, telling the tokenizer manager when its shutdown begins (before it waits
    for open connections), so that in-flight requests end at once with a 503 instead of running
    on until the grace period cancels each one (one logged traceback apiece: at c=1024, 3.6 s of
    the tokenizer manager's CPU)."""

    def __init__(self, config: uvicorn.Config, on_shutdown_start: Callable[[], None]) -> None:
        super().__init__(config)
        self.on_shutdown_start = on_shutdown_start

    async def shutdown(self, sockets: Optional[list[socket.socket]] = None) -> None:
        self.on_shutdown_start()
        await super().shutdown(sockets)


def build_app(tm: TokenizerManager, on_shutdown: Optional[Callable[[], None]] = None,
              max_body_bytes: Optional[int] = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await tm.start()
        cfg = tm.config
        logger.info("ready: http://%s:%d  model=%s transport=%s dp_size=%d device=%s", cfg.host, cfg.port,
                    cfg.served_model_name, cfg.transport, cfg.dp_size, cfg.device)
        try:
            yield
        finally:
            await tm.stop()
            if on_shutdown is not None:
                on_shutdown()

    app = FastAPI(title="ipc-conformance reference engine", lifespan=lifespan)
    app.state.tm = tm
    if max_body_bytes is not None:
        app.add_middleware(BodyLimit, max_bytes=max_body_bytes)

    @app.exception_handler(RequestError)
    async def _request_error(request: Request, exc: RequestError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(EngineError)
    async def _engine_error(request: Request, exc: EngineError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(ClientGone)
    async def _client_gone(request: Request, exc: ClientGone) -> Response:
        return Response(status_code=499)  # nobody reads it: the client left (nginx's code)

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
        return error_response(exc)  # a JSON 500 (logged), never a plain-text one

    @app.post("/generate")
    async def generate(request: Request) -> Response:
        req = parse_body(GenerateRequest, await request.body())
        specs, is_batch = protocol.generate_specs(req, tm.tokenizer, tm.vocab_size, tm.context_length)
        headers = trace_headers(request.headers)
        if req.stream:
            agen = tm.generate(specs[0], headers)
            first = await first_item(agen)
            return await stream_response(first, agen, lambda out: [sse(out)])
        results = await unless_disconnected(
            request, asyncio.gather(*(collect(tm.generate(s, headers)) for s in specs)))
        return JSONAnswer(results if is_batch else results[0])

    @app.post("/encode")
    async def encode(request: Request) -> Response:
        req = parse_body(EncodeRequest, await request.body())
        specs, is_batch = protocol.encode_specs(req, tm.tokenizer, tm.vocab_size, tm.context_length)
        headers = trace_headers(request.headers)
        results = await unless_disconnected(request, asyncio.gather(*(tm.encode(s, headers) for s in specs)))
        return JSONAnswer(results if is_batch else results[0])

    @app.post("/abort_request")
    async def abort_request(request: Request) -> Response:
        req = parse_body(AbortRequest, await request.body())
        if not req.rid and not req.abort_all:
            raise RequestError("rid: give a rid or abort_all=true", param="rid")
        await tm.abort(req.rid, req.abort_all)
        return JSONAnswer({})

    @app.api_route("/flush_cache", methods=["GET", "POST"])
    async def flush_cache() -> Response:
        success, message = await tm.flush_cache()
        return JSONAnswer({"success": success, "message": message}, status_code=200 if success else 400)

    @app.api_route("/open_session", methods=["POST"])
    async def open_session(request: Request) -> Response:
        obj = protocol.control_request(OpenSessionReqInput, await request.body())
        success, session_id = await tm.open_session(obj)
        if not success:
            raise RequestError(f"session_id: session {session_id!r} is already open", param="session_id")
        return JSONAnswer(session_id)

    @app.post("/close_session")
    async def close_session(request: Request) -> Response:
        await tm.broadcast(protocol.control_request(CloseSessionReqInput, await request.body()))
        return Response(status_code=200)

    @app.post("/pause_generation")
    async def pause_generation(request: Request) -> Response:
        await tm.broadcast(protocol.control_request(PauseGenerationReqInput, await request.body()))
        return JSONAnswer({"message": "Generation paused successfully."})

    @app.post("/continue_generation")
    async def continue_generation(request: Request) -> Response:
        await tm.broadcast(protocol.control_request(ContinueGenerationReqInput, await request.body()))
        return JSONAnswer({"message": "Generation continued successfully."})

    @app.post("/update_weights_from_tensor")
    async def update_weights_from_tensor(request: Request) -> Response:
        obj = protocol.update_weights_request(await request.body(), tm.parameter_shapes)
        success, message = await tm.update_weights_from_tensor(obj)
        return JSONAnswer({"success": success, "message": message}, status_code=200 if success else 400)

    @app.get("/health")
    async def health() -> Response:
        healthy, body = tm.health()
        return JSONAnswer(body, status_code=200 if healthy else 503)

    @app.get("/health_generate")
    async def health_generate() -> Response:
        healthy, body = tm.health()
        if healthy:
            params = protocol.sampling_params_from({"max_new_tokens": 1, "temperature": 0}, tm.vocab_size)
            spec = protocol.GenerateSpec(input_ids=tm.tokenizer.encode("health"), input_text=None,
                                         sampling_params=params)
            await collect(tm.generate(spec))
        return JSONAnswer(body, status_code=200 if healthy else 503)

    @app.get("/get_server_info")
    @app.get("/server_info")
    async def get_server_info() -> Response:
        return JSONAnswer(tm.server_info())

    @app.get("/get_model_info")
    @app.get("/model_info")
    async def get_model_info() -> Response:
        return JSONAnswer({"model_path": tm.config.model_path, "tokenizer_path": tm.config.model_path,
                             "is_generation": True, "served_model_name": tm.config.served_model_name,
                             "weight_version": tm.weight_version})

    add_openai_routes(app, tm)
    return app
