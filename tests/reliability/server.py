"""A reference server in a subprocess, for the reliability tests: start, load, break, stop, count leftovers.

The E2E harness's ServerProcess with this group's defaults (no tap or tracing unless asked:
they cost time under load) and the resident memory of every process; many requests at once.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import httpx

from reference_tools.e2e.harness import ServerProcess


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass
class Server(ServerProcess):
    """The E2E harness's server with the reliability group's defaults: tap and trace off unless
    asked, the server's own request timeout, quiet logs, a longer start under load, and the
    resident memory of every process."""

    tap: bool = False
    trace: bool = False
    request_timeout_s: Optional[float] = None
    start_timeout_s: float = 120.0
    log_level: Optional[str] = "warning"

    def start(self, model_cache: Path) -> "Server":  # type: ignore[override]
        self.env = {**self.env, "IPC_ENGINE_CACHE": str(model_cache)}
        super().start()
        return self

    def rss(self) -> dict[str, int]:
        return {name: rss_bytes(pid) for name, pid in self.pids.items()}


# -- many requests at once -----------------------------------------------------------------------
@dataclass
class Outcome:
    """What one request got: a complete answer, or an explicit error - and the evidence."""

    rid: str
    stream: bool
    status: Optional[int] = None
    complete: bool = False  # a final answer (non-stream) / a final event then [DONE] (stream)
    error: Optional[dict] = None  # an explicit error: the JSON error body or the error event
    transport_error: Optional[str] = None  # the connection failed (no answer at all)
    events: int = 0
    done_markers: int = 0
    output_ids: list = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    problems: list = field(default_factory=list)  # protocol violations seen (duplicates, regressions...)
    seconds: float = 0.0
    ended_at: float = 0.0


async def generate(client: httpx.AsyncClient, rid: str, *, stream: bool, max_new_tokens: int,
                   text: Optional[str] = None, started: Optional[asyncio.Event] = None) -> Outcome:
    out = Outcome(rid=rid, stream=stream)
    body = {"text": text or f"request {rid}", "rid": rid, "stream": stream,
            "sampling_params": {"max_new_tokens": max_new_tokens, "ignore_eos": True, "temperature": 0}}
    t0 = time.monotonic()
    try:
        if not stream:
            r = await client.post("/generate", json=body)
            out.status = r.status_code
            data = r.json()
            if r.status_code == 200:
                out.complete, out.output_ids, out.meta = True, data["output_ids"], data["meta_info"]
            else:
                out.error = data
        else:
            async with client.stream("POST", "/generate", json=body) as r:
                out.status = r.status_code
                if r.status_code != 200:
                    out.error = json.loads(await r.aread())
                else:
                    final = False
                    async for line in r.aiter_lines():
                        if not line.startswith("data: "):
                            continue
                        payload = line[len("data: "):]
                        if payload == "[DONE]":
                            out.done_markers += 1
                            continue
                        if out.done_markers:
                            out.problems.append("an event after [DONE]")
                        event = json.loads(payload)
                        out.events += 1
                        if started is not None:
                            started.set()
                        if "error" in event:
                            out.error = event["error"]
                            continue
                        ids = event["output_ids"]
                        if ids[:len(out.output_ids)] != out.output_ids or len(ids) <= len(out.output_ids):
                            out.problems.append(f"event {out.events}: output_ids {len(out.output_ids)} -> {len(ids)} "
                                                "is not a strict extension (duplicated or lost chunk)")
                        if final:
                            out.problems.append("an event after the final one")
                        out.output_ids, out.meta = ids, event["meta_info"]
                        final = event["meta_info"].get("finish_reason") is not None
                    out.complete = final and out.done_markers == 1 and out.error is None
                    if out.done_markers != 1:
                        out.problems.append(f"{out.done_markers} [DONE] markers")
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        out.transport_error = f"{type(exc).__name__}: {exc}"
    out.seconds = time.monotonic() - t0
    out.ended_at = time.monotonic()
    return out


def async_client(url: str, connections: int, timeout: float = 120.0) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(timeout, connect=30.0),
                             limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections))


async def burst(url: str, n: int, *, max_new_tokens: int, prefix: str, stream_every: int = 2,
                timeout: float = 120.0) -> list[Outcome]:
    """n requests at once (every stream_every-th one streaming), each with a distinct rid."""
    async with async_client(url, n, timeout) as client:
        return list(await asyncio.gather(*(
            generate(client, f"{prefix}-{i}", stream=i % stream_every == 0, max_new_tokens=max_new_tokens)
            for i in range(n))))


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    rids = [o.rid for o in outcomes]
    answered = [o.meta.get("id") for o in outcomes if o.complete]
    return {
        "requests": len(outcomes),
        "complete": sum(o.complete for o in outcomes),
        "explicit_errors": sum(o.error is not None for o in outcomes),
        "no_answer": sum(not o.complete and o.error is None for o in outcomes),
        "transport_errors": sum(o.transport_error is not None for o in outcomes),
        "duplicate_rids_answered": len(answered) - len(set(answered)),
        "wrong_rid_answered": sum(o.complete and o.meta.get("id") != o.rid for o in outcomes),
        "distinct_rids": len(set(rids)),
        "protocol_problems": [f"{o.rid}: {p}" for o in outcomes for p in o.problems][:20],
        "max_seconds": round(max((o.seconds for o in outcomes), default=0.0), 2),
    }
