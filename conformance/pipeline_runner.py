"""Runs pipeline runs of an implementation whose pipeline is a Python module started in a
process of its own (``python -m MODULE RUNS.json OUT.json``): several topologies in one process
(the engine is imported once), the transport chosen through the environment the way its users
choose it, the process bounded in time, a hung one killed with its process group and reported,
never waited on. The module writes ``{"runs": [record, ...]}`` after each run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from conformance.pipeline import REQUEST_TIMEOUT_S, RUN_TIMEOUT_S, PipelineRun, Topology, scenario


def run_module(module: str, transport: str, topologies: Sequence[Topology], workdir: Path, *,
               env: Mapping[str, str], not_driven: Optional[Mapping[str, str]] = None,
               timeout_s: float = RUN_TIMEOUT_S) -> list[PipelineRun]:
    """The runs of ``topologies`` over ``transport`` in one process of MODULE, as PipelineRuns
    in the same order. A run that did not happen (the process did not start, died or hung
    first) comes back with its reason in ``errors``: its checks fail on it."""
    workdir.mkdir(parents=True, exist_ok=True)
    config_path, out_path, log_path = workdir / "runs.json", workdir / "out.json", workdir / "log.txt"
    config_path.write_text(json.dumps({"transport": transport, "timeout_s": REQUEST_TIMEOUT_S, "runs": [
        {"topology": t.as_config(), "scenario": [{k: v for k, v in step.items() if k != "sent_bytes"}
                                                 for step in scenario(t)]} for t in topologies]}))
    bound = timeout_s * len(topologies)
    started = time.monotonic()
    problem = ""
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", module, str(config_path), str(out_path)],
                                   env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            process.wait(timeout=bound)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            problem = f"killed after {bound:.0f} s (a hop hung; log: {log_path})"
    seconds = time.monotonic() - started
    records: list[dict[str, Any]] = json.loads(out_path.read_text())["runs"] if out_path.exists() else []
    if not problem and len(records) < len(topologies):
        tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        problem = f"ended (exit {process.returncode}) before this run: {tail[0]} (log: {log_path})"
    runs = []
    for index, topology in enumerate(topologies):
        run = PipelineRun(transport=transport, topology=topology, not_driven=dict(not_driven or {}),
                          seconds=seconds / len(topologies))
        if index < len(records):
            _fill(run, records[index])
        else:
            run.errors.append(f"the {topology.name} run over {transport}: the process {problem}")
        runs.append(run)
    return runs


def _fill(run: PipelineRun, record: Mapping[str, Any]) -> None:
    run.selected = record.get("selected", "")
    run.hops = record.get("hops", {})
    run.responses = record.get("responses", {})
    run.received = record.get("received", [])
    run.produced = record.get("produced", {})
    run.links = record.get("links", {})
    run.errors += record.get("errors", [])
