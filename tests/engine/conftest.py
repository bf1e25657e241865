"""End-to-end runs of the reference engine, shared by the e2e tests of this folder.

A run = one real server (subprocesses, ZeroMQ, the tiny model on CPU) for one
(transport, dp_size): start it, send the scenario, stop it with a signal, collect
the responses, the tap records, the spans and the shutdown report. Runs are
started lazily, once per session, and each is stopped before its results are
handed out, so at most one server runs at a time (2-core machines); a hung one is
killed with its whole process group.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from reference_tools.e2e import Client, EngineRun, ServerProcess, run_engine
from reference_tools.e2e.scenario import count_records


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: end-to-end check against a real reference server (subprocesses, "
                                       "ZeroMQ, tiny model); select with -m e2e, skip with -m 'not e2e'")


RUNS: dict[str, dict[str, Any]] = {
    "msgpack-dp1": {"transport": "msgpack", "dp_size": 1, "stop": signal.SIGINT},
    "pickle-dp1": {"transport": "pickle", "dp_size": 1, "stop": signal.SIGTERM, "use_cli": True},
    "msgpack-dp2": {"transport": "msgpack", "dp_size": 2, "stop": signal.SIGTERM, "fault": "kill_scheduler"},
    "pickle-dp2": {"transport": "pickle", "dp_size": 2, "stop": signal.SIGTERM},
    # The check must catch a controller that forgets to unwrap (upstream's bug): msgpack only.
    "msgpack-dp1-controller-skips-unwrap": {"transport": "msgpack", "dp_size": 1, "stop": signal.SIGTERM,
                                            "args": ("--debug-skip-unwrap", "controller"), "scenario": "minimal"},
}


def minimal_scenario(server: ServerProcess) -> dict:
    c = Client(server.url)
    try:
        r = c.post("/generate", {"text": "hi", "sampling_params": {"temperature": 0, "max_new_tokens": 4}})
        return {"generate": {"status": r.status_code, "body": r.json()}}
    finally:
        c.close()


def kill_scheduler_fault(server: ServerProcess) -> dict:
    """A scheduler dies while serving: the in-flight request errors, /health is 503, nothing hangs."""
    c = Client(server.url)
    victim_name = f"scheduler_{server.dp_size - 1}"
    victim = server.info["pids"][victim_name]
    outputs = count_records(server, "tokenizer_manager")
    events: list = []
    error: dict = {}

    def stream() -> None:
        try:
            for event in c.stream("/generate", {"text": "doomed", "stream": True, "routed_dp_rank": server.dp_size - 1,
                                                "sampling_params": {"temperature": 0, "ignore_eos": True,
                                                                    "max_new_tokens": 480}}):
                events.append(event)
        except Exception as exc:  # noqa: BLE001 - recorded for the test
            error["exception"] = repr(exc)

    reader = threading.Thread(target=stream, daemon=True)
    reader.start()
    # Mid-stream, on a loaded machine too: freeze the scheduler as soon as its first output reached
    # the tokenizer manager (its tap), so it cannot finish all 480 tokens before the client has
    # seen the first event; then kill it.
    deadline = time.monotonic() + 10
    while count_records(server, "tokenizer_manager") == outputs and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(victim, signal.SIGSTOP)
    while not events and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(victim, signal.SIGKILL)
    killed = time.monotonic()
    reader.join(15)
    out = {"stream_finished": not reader.is_alive(), "seconds_to_error": time.monotonic() - killed,
           "last_event": events[-1] if events else None, "error": error}
    quick = Client(server.url, timeout=5)  # after the death nothing may hang: short timeouts, recorded
    for key, call in (("health", lambda: quick.get("/health")),
                      ("new_request", lambda: quick.post("/generate", {"text": "after",
                                                                       "sampling_params": {"max_new_tokens": 2}})),
                      ("flush", lambda: quick.post("/flush_cache"))):
        t0 = time.monotonic()
        try:
            r = call()
            out[key] = {"status": r.status_code, "body": r.json(), "seconds": time.monotonic() - t0}
        except Exception as exc:  # noqa: BLE001 - a hang shows up as a timeout here
            out[key] = {"status": None, "error": repr(exc), "seconds": time.monotonic() - t0}
    quick.close()
    c.close()
    return out


_DONE: dict[str, Any] = {}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    runs = [r for r in _DONE.values() if isinstance(r, EngineRun)]
    if runs:
        terminalreporter.section("reference engine runs")
        for r in runs:
            terminalreporter.write_line(r.timing_line())


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty cache: the first server writes the default tiny checkpoint itself (a fresh machine)."""
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(scope="session")
def engine_run(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> Callable[[str], EngineRun]:
    """The run of that name (reference_tools.e2e.run_engine), started on first use, once per session."""
    done = _DONE

    def get(name: str) -> EngineRun:
        if name in done:
            if isinstance(done[name], BaseException):
                pytest.fail(f"run {name} failed earlier: {done[name]!r}")
            return done[name]
        spec = RUNS[name]
        server = ServerProcess(tmp_path_factory.mktemp(name), spec["transport"], spec["dp_size"],
                               extra_args=tuple(spec.get("args", ())), use_cli=spec.get("use_cli", False),
                               env={"IPC_ENGINE_CACHE": str(model_cache)})
        try:
            run = run_engine(name, spec["transport"], spec["dp_size"], server.start,
                             scenario=minimal_scenario if spec.get("scenario") == "minimal" else None,
                             fault=kill_scheduler_fault if spec.get("fault") == "kill_scheduler" else None,
                             stop_signal=spec["stop"])
        except BaseException as exc:
            server.kill()
            done[name] = exc
            raise RuntimeError(f"run {name} failed: {exc!r}\n--- server log ---\n{server.log_tail(60)}") from exc
        done[name] = run
        return run

    return get
