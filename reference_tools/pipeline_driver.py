"""The reference engine's own pipeline, one run per process (``python -m
reference_tools.pipeline_driver RUN.json OUT.json``, started by conformance.pipeline_runner for
ReferenceAdapter.run_pipeline): the differential pipeline runs of the ``pipeline`` capability
(conformance/pipeline.py says what a run is and how runs are judged).

    HTTP client (httpx, a real TCP port)
      -> the engine's server process: uvicorn + http_api.py (its routes, its body validation)
         -> tokenizer_manager.py (its send, its output handler)
      -> controller.py (its receive path, the run's load-balance method, broadcast)
      -> scheduler.py x dp size (its receive path, batching, output building; --model stub:
         stub_model.py instead of the forward pass)
      -> detokenizer.py -> the tokenizer manager -> the HTTP response

Every process is the engine's own (``python -m reference_impl.server`` and its children, started
through the engine's forkserver, ``--start-method forkserver``: the engine and torch imported once,
not once per process), every boundary a real ZeroMQ socket crossed by its own send and receive
paths. The transport is chosen the way its users choose it: ``SGLANG_USE_PICKLE_IPC`` in the
environment (spelled as the topology says, conformance.pipeline.switch_value), ``IPC_TRANSPORT``
removed and no ``--ipc-transport`` flag. The engine's tap (``--tap-dir``,
reference_impl/engine/tap.py) records every received message, each message sent and what the stub
produced; the adapter reads it after the run. The server runs in this process's group, so a run
killed for hanging takes it along.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Optional

#: The server must be up within this (every engine process imports torch; two runs share the cores).
START_TIMEOUT_S = 150.0
STOP_TIMEOUT_S = 20.0
#: Answers that say the pipeline lost the request (a dead engine process, the engine's timeout).
UNANSWERED = (503, 504)
#: Above the scenario's largest body (a weight payload just over 64 MiB, in base64).
MAX_REQUEST_BYTES = 256 << 20

HOPS = {
    "http": "reference_impl.engine.http_api (uvicorn on a TCP port; its routes and body validation)",
    "tokenizer_manager": "reference_impl.engine.tokenizer_manager.TokenizerManager: its send and output handler",
    "controller": "reference_impl.engine.controller.DataParallelController (its own process): receive path, "
                  "the run's load-balance method, broadcast",
    "scheduler": "reference_impl.engine.scheduler.Scheduler (one process per rank): receive path, batching, "
                 "output building and sending; --model stub (stub_model.py) instead of the forward pass",
    "detokenizer": "reference_impl.engine.detokenizer.Detokenizer (its own process)",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def server_command(topology: dict[str, Any], port: int, tap_dir: Path, request_timeout_s: float) -> list[str]:
    return [sys.executable, "-m", "reference_impl.server", "--model", "stub", "--device", "cpu",
            "--port", str(port), "--dp-size", str(topology["dp_size"]),
            "--load-balance-method", str(topology["load_balance_method"]), "--tap-dir", str(tap_dir),
            "--max-request-bytes", str(MAX_REQUEST_BYTES), "--request-timeout", f"{request_timeout_s:g}",
            "--start-method", "forkserver", "--log-level", "warning"]


def main(config_path: str, out_path: str) -> int:
    """Every run the file names, in order, each with a server of its own (its topology is the
    server's launch options); the records are written after each run, so a run that hangs keeps
    those before it."""
    try:
        config = json.loads(Path(config_path).read_text())
        runs, timeout_s = list(config["runs"]), float(config["timeout_s"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"pipeline_driver: {config_path}: not a runs file ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    workdir = Path(out_path).parent
    records: list[dict[str, Any]] = []
    for one in runs:
        records.append(run_one(one, timeout_s, workdir / f"run-{one['topology']['name']}"))
        Path(out_path + ".part").write_text(json.dumps({"runs": records}))
        os.replace(out_path + ".part", out_path)
    return 0


def run_one(config: dict[str, Any], timeout_s: float, workdir: Path) -> dict[str, Any]:
    """One topology: the server started, the scenario driven, the server stopped."""
    workdir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"topology": config["topology"]["name"], "hops": {}, "errors": []}
    server: Optional[subprocess.Popen[bytes]] = None
    began = time.monotonic()
    name = config["topology"]["name"]
    try:
        server, url = start(config, timeout_s, workdir)
        print(f"{name}: server healthy after {time.monotonic() - began:.1f} s", flush=True)
        result.update(run(config, timeout_s, server, url, workdir))
        print(f"{name}: scenario answered after {time.monotonic() - began:.1f} s", flush=True)
    except BaseException:  # noqa: BLE001 - what the parent reports, naming the run
        result["errors"].append(traceback.format_exc(limit=4))
    finally:
        if server is not None:
            stop(server, result)
            print(f"{name}: server stopped after {time.monotonic() - began:.1f} s", flush=True)
    return result


def start(config: dict[str, Any], timeout_s: float, workdir: Path) -> tuple["subprocess.Popen[bytes]", str]:
    """The engine's server, healthy, and its URL."""
    import httpx

    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "IPC_TRANSPORT"}  # the run's switch decides
    log = open(workdir / "server.log", "wb")
    # The engine's own bound on a request (--request-timeout) is the scenario's: a request the
    # pipeline lost is answered 504 by the engine itself, one a busy machine is slow on is not.
    server = subprocess.Popen(server_command(config["topology"], port, workdir / "tap", timeout_s),
                              stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise RuntimeError(f"the reference server exited with {server.returncode} during startup: "
                                   f"{_tail(workdir / 'server.log')}")
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    return server, url
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the reference server was not healthy within {START_TIMEOUT_S:.0f} s: "
                           f"{_tail(workdir / 'server.log')}")
    except BaseException:
        server.kill()  # its engine processes exit when they see it gone (runtime.py)
        server.wait()
        raise


def run(config: dict[str, Any], timeout_s: float, server: "subprocess.Popen[bytes]", url: str,
        workdir: Path) -> dict[str, Any]:
    import httpx

    from conformance.pipeline import ENGINE_ENCODE
    from conformance.pipeline_tap import drive

    info = httpx.get(url + "/get_server_info", timeout=10).json()

    def dead() -> str:
        return f"the reference server (exit {server.returncode}: {_tail(workdir / 'server.log')})" \
            if server.poll() is not None else ""

    async def scenario() -> dict[str, Any]:
        """Step by step; after the first request the pipeline did not answer (no response, or the
        engine's own 503/504), the rest are not sent: one bound spent, not one per step."""
        responses: dict[str, Any] = {}
        stopped = ""
        async with httpx.AsyncClient(base_url=url, timeout=timeout_s) as client:
            for step in config["scenario"]:
                if stopped:
                    responses[step["name"]] = {"$error": f"not sent: {stopped}"}
                    continue
                if step["path"] == ENGINE_ENCODE:  # the reference's pooled states come over HTTP /encode
                    step = {**step, "path": "/encode"}
                responses.update(await drive(client, [step], timeout_s, dead))
                answer = responses[step["name"]]
                if "$error" in answer or answer.get("status") in UNANSWERED:
                    stopped = f"the pipeline did not answer {step['name']!r} ({answer.get('status', 'no response')})"
        return responses

    hops = dict(HOPS)
    hops["controller"] += f" ({info['dp_size']} rank(s), {config['topology']['load_balance_method']})"
    return {"selected": info.get("transport", ""), "hops": hops, "responses": asyncio.run(scenario())}


def stop(server: "subprocess.Popen[bytes]", result: dict[str, Any]) -> None:
    """SIGINT, as a user stops it; its engine processes are joined by the server itself."""
    if server.poll() is None:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
            result["errors"].append(f"the reference server did not stop within {STOP_TIMEOUT_S:.0f} s of SIGINT")


def records(tap_dir: Path) -> dict[str, Any]:
    """What the engine's tap recorded in a run, in the PipelineRun's forms: ``received`` (what
    each scheduler rank's receive path handed on, field by field; a batch by its requests),
    ``produced`` (the stub's record by rid) and ``links`` (per receiving process: messages
    received, their kinds, the largest, and how many were sent towards it)."""
    import pickle

    from conformance.pipeline_tap import frame_kind, received_form
    from reference_impl.engine.stub_model import read_produced
    from reference_impl.engine.tap import UNDECODABLE, read_sent, read_tap

    received: list[dict[str, Any]] = []
    links: dict[str, dict[str, Any]] = {}
    sent = read_sent(tap_dir)
    for rec in read_tap(tap_dir):
        link = links.setdefault(rec.process, {"frames": 0, "kinds": set(), "largest": 0, "sent": sent[rec.process]})
        link["frames"] += 1
        link["kinds"].add(frame_kind(rec.frames[0]) if rec.frames else "empty")
        link["largest"] = max(link["largest"], sum(len(f) for f in rec.frames))
        if rec.process.startswith("scheduler_") and rec.delivered_type != UNDECODABLE and rec.delivered is not None:
            rank = int(rec.process.rpartition("_")[2])
            obj = pickle.loads(rec.delivered)  # the engine's own objects, written by its tap
            for item in getattr(obj, "batch", None) or [obj]:
                received.append({"rank": rank, "type": type(item).__name__, "rid": getattr(item, "rid", None),
                                 "form": received_form(item)})
    for process, count in sent.items():
        links.setdefault(process, {"frames": 0, "kinds": set(), "largest": 0, "sent": count})
    for link in links.values():
        link["kinds"] = sorted(link["kinds"])
    return {"received": received, "produced": read_produced(tap_dir), "links": dict(sorted(links.items()))}


def _tail(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
