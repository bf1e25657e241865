"""What both route modules (http_api.py, openai_api.py) share: SSE framing, JSON error answers,
streams that turn an engine error into an error event, and cancelling work when the client leaves."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, AsyncGenerator, AsyncIterator, Awaitable, Callable

import msgspec
from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from .protocol import RequestError
from .tokenizer_manager import EngineError

logger = logging.getLogger(__name__)


def json_bytes(data: Any) -> bytes:
    """Compact JSON of an answer, as SGLang's orjson responses are. msgspec, not the json module:
    at c=1024 streams the tokenizer manager spent more CPU in json.dumps than in any other
    function (a streamed chunk repeats the ids so far), about 13x what msgspec takes. A non-finite
    float (a logprob of -inf: a token the model rules out) has no JSON form and is written null,
    as orjson writes it."""
    return msgspec.json.encode(data)


class JSONAnswer(JSONResponse):
    """A JSON response whose non-finite floats are null (json_bytes), not a 500."""

    def render(self, content: Any) -> bytes:
        return json_bytes(content)


def sse(data: Any) -> bytes:
    return b"data: " + json_bytes(data) + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"


def error_response(exc: Exception) -> JSONResponse:
    if isinstance(exc, (RequestError, EngineError)):
        return JSONAnswer(exc.to_json(), status_code=exc.status_code)
    logger.exception("internal error", exc_info=exc)
    return JSONAnswer(EngineError(f"{type(exc).__name__}: {exc}").to_json(), status_code=500)


async def stream_response(first: Any, rest: AsyncGenerator[Any, None], render: Callable[[Any], list[bytes]],
                          tail: Callable[[], list[bytes]] = lambda: []) -> StreamingResponse:
    """SSE: the already-received first item, the rest, [DONE]; an engine error mid-stream becomes an error event."""

    async def body() -> AsyncIterator[bytes]:
        try:
            for chunk in render(first):
                yield chunk
            async for item in rest:
                for chunk in render(item):
                    yield chunk
            for chunk in tail():
                yield chunk
        except (EngineError, RequestError) as exc:
            yield sse({"error": exc.to_json()})
        finally:
            await rest.aclose()
        yield SSE_DONE

    return StreamingResponse(body(), media_type="text/event-stream")


async def first_item(agen: AsyncGenerator[Any, None]) -> Any:
    """Start a stream: errors before the first item are plain HTTP errors, not a 200 stream."""
    try:
        return await agen.__anext__()
    except BaseException:
        await agen.aclose()
        raise


async def collect(agen: AsyncIterator[Any]) -> Any:
    last = None
    async for item in agen:
        last = item
    return last


class ClientGone(Exception):
    """The HTTP client disconnected before its (non-streaming) answer was ready."""


async def _until_disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(request: Request, work: Awaitable[Any]) -> Any:
    """Await work (the body is already read); if the client disconnects first, cancel it - the
    tokenizer manager then aborts the requests in the scheduler, which stops spending compute
    on them - and raise ClientGone."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_until_disconnected(request))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if not task.done():
        task.cancel()
        try:
            await task
        except BaseException:  # noqa: BLE001 - cancelled, or failed while cancelling: either way gone
            pass
        raise ClientGone()
    return task.result()
