"""Runs one pipeline run of an implementation whose pipeline is a Python module started in a
process of its own (``python -m MODULE RUN.json OUT.json``): the transport chosen through the
environment the way its users choose it, the run bounded in time, a hung run killed with its
process group and reported, never waited on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping, Optional

from conformance.pipeline import REQUEST_TIMEOUT_S, RUN_TIMEOUT_S, PipelineRun, Topology, scenario


def run_module(module: str, transport: str, topology: Topology, workdir: Path, *, env: Mapping[str, str],
               not_driven: Optional[Mapping[str, str]] = None, timeout_s: float = RUN_TIMEOUT_S) -> PipelineRun:
    """One (transport, topology) run of MODULE; what it wrote, as a PipelineRun. A run that does
    not start, dies or hangs comes back with its reason in ``errors`` (its checks fail on it)."""
    workdir.mkdir(parents=True, exist_ok=True)
    config_path, out_path = workdir / "run.json", workdir / "out.json"
    steps = [{k: v for k, v in step.items() if k != "sent_bytes"} for step in scenario(topology)]
    config_path.write_text(json.dumps({"topology": topology.as_config(), "transport": transport,
                                       "timeout_s": REQUEST_TIMEOUT_S, "scenario": steps}))
    run = PipelineRun(transport=transport, topology=topology, not_driven=dict(not_driven or {}))
    log_path = workdir / "log.txt"
    started = time.monotonic()
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", module, str(config_path), str(out_path)],
                                   env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            run.errors.append(f"the {topology.name} run over {transport} was killed after {timeout_s:.0f} s "
                              f"(a hop hung; its log: {log_path})")
            return run
    run.seconds = time.monotonic() - started
    if not out_path.exists():
        tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        run.errors.append(f"the {topology.name} run over {transport} ended (exit {process.returncode}) "
                          f"without a record: {tail[0]} (log: {log_path})")
        return run
    record = json.loads(out_path.read_text())
    run.selected = record.get("selected", "")
    run.hops = record.get("hops", {})
    run.responses = record.get("responses", {})
    run.received = record.get("received", [])
    run.produced = record.get("produced", {})
    run.links = record.get("links", {})
    run.errors += record.get("errors", [])
    return run
