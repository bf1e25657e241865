"""A reference server in a subprocess, for the reliability tests: start, load, break, stop, count leftovers.

Smaller than reference_tools.e2e's harness on purpose: no tap or tracing unless asked (they
cost time under load), and the numbers these tests need - resident memory of every
process, the child pids, what is left after a stop - in one place.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import httpx

from reference_tools.e2e.harness import free_port, pid_alive

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass
class Server:
    workdir: Path
    transport: str = "msgpack"
    dp_size: int = 1
    args: tuple[str, ...] = ()
    tap: bool = False
    port: int = field(default_factory=free_port)
    proc: Optional[subprocess.Popen] = None
    info: dict = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def tap_dir(self) -> Path:
        return self.workdir / "tap"

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    def start(self, model_cache: Path) -> "Server":
        self.workdir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "reference_impl.server", "--port", str(self.port), "--device", "cpu",
               "--dp-size", str(self.dp_size), "--ipc-transport", self.transport, "--log-level", "warning",
               *(["--tap-dir", str(self.tap_dir)] if self.tap else []), *self.args]
        env = {**os.environ, "IPC_ENGINE_CACHE": str(model_cache)}
        env.pop("IPC_TRANSPORT", None)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode} during startup:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    self.info = httpx.get(self.url + "/get_server_info", timeout=5).json()
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"server not healthy within {START_TIMEOUT_S:.0f} s:\n{self.log_tail()}")

    # -- numbers ---------------------------------------------------------------------------
    @property
    def pids(self) -> dict[str, int]:
        out = {"server": self.proc.pid} if self.proc else {}
        out.update(self.info.get("pids", {}))
        return out

    def rss(self) -> dict[str, int]:
        return {name: rss_bytes(pid) for name, pid in self.pids.items()}

    def server_info(self) -> dict:
        return httpx.get(self.url + "/get_server_info", timeout=10).json()

    def health(self, timeout: float = 5.0) -> httpx.Response:
        return httpx.get(self.url + "/health", timeout=timeout)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    # -- the end ---------------------------------------------------------------------------
    def leftovers(self) -> dict:
        """Processes still alive and the IPC directory still on disk (both must be none); then
        removes whatever was left, so a failing check leaves no litter either."""
        time.sleep(0.2)
        alive = {name: pid for name, pid in self.pids.items() if pid_alive(pid)}
        for pid in alive.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        ipc_dir = self.info.get("ipc_dir")
        left = bool(ipc_dir and Path(ipc_dir).exists())
        if left:
            shutil.rmtree(ipc_dir, ignore_errors=True)
        return {"orphans": alive, "ipc_dir_left": left}

    def wait_exit(self, timeout: float) -> Optional[int]:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, sig: int = signal.SIGTERM) -> dict:
        """Signal the server and wait; the exit code, whether it hung, and the leftovers."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.wait_exit(STOP_TIMEOUT_S)
        hung = code is None
        if hung:
            self.kill()
            code = self.proc.returncode
        self._log.close()
        return {"exit_code": code, "hung": hung, **self.leftovers()}

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        for pid in self.info.get("pids", {}).values():
            if pid_alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self.info.get("ipc_dir"):
            shutil.rmtree(self.info["ipc_dir"], ignore_errors=True)


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
