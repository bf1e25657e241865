"""Faults: an engine process killed (SIGKILL) in the middle of a load.

For each of the scheduler, the data-parallel controller and the detokenizer, one at a time:
every in-flight request ends within a few seconds with an explicit error (503 naming the
dead process; a stream gets an error event and [DONE]) - none hangs, none is silently
lost; /health turns 503 and names it; new requests are refused at once; and the server
then either shuts down by itself (--exit-on-child-death) or on SIGTERM, leaving no
process and no IPC socket file behind. Killing the server process itself makes the
children exit on their own. Stopping the server (SIGTERM) in the middle of a load ends every
in-flight request at once with a 503 "shutting down" (a stream: an error event and [DONE]),
within the HTTP server's grace period, without a traceback logged per request.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Callable

import httpx
import pytest

from reference_tools.e2e.harness import pid_alive

from .server import Outcome, Server, async_client, generate

pytestmark = pytest.mark.reliability
TEST_TIMEOUT_S = 180

IN_FLIGHT = 48  # concurrent requests when the process dies (half streaming)
LONG = 480  # tokens each would generate (the tiny model's context is 512): none finishes before the kill
ERROR_WITHIN_S = 5.0
RESULTS: dict = {}


async def _load_then(server: Server, prefix: str, act: Callable[[], None]) -> tuple[list[Outcome], float]:
    """IN_FLIGHT long requests (half streaming); once a stream produced a token, act (a kill, a
    stop): the outcomes and when it acted."""
    started = asyncio.Event()
    async with async_client(server.url, IN_FLIGHT, timeout=60) as client:
        tasks = [asyncio.ensure_future(generate(client, f"{prefix}-{i}", stream=i % 2 == 0, max_new_tokens=LONG,
                                                started=started if i % 2 == 0 else None))
                 for i in range(IN_FLIGHT)]
        await asyncio.wait_for(started.wait(), 60)
        await asyncio.sleep(0.3)  # let every request get admitted
        act()
        acted_at = time.monotonic()
        outcomes = list(await asyncio.gather(*tasks))
    return outcomes, acted_at


async def _load_then_kill(server: Server, victim: str) -> tuple[list[Outcome], float]:
    """SIGKILL the victim process in the middle of the load."""
    pid = server.info["pids"][victim]
    return await _load_then(server, victim, lambda: os.kill(pid, signal.SIGKILL))


def _check_in_flight_requests_failed_fast(victim: str, outcomes: list[Outcome], killed_at: float) -> dict:
    failed = [o for o in outcomes if not o.complete]
    numbers = {
        "in_flight": len(outcomes),
        "completed_before_kill": sum(o.complete for o in outcomes),
        "explicit_errors": sum(o.error is not None for o in outcomes),
        "no_answer": sum(not o.complete and o.error is None for o in outcomes),
        "slowest_error_s": round(max((o.ended_at - killed_at for o in failed), default=0.0), 2),
    }
    assert failed, f"no request was in flight when {victim} died: {numbers}"
    for o in failed:
        assert o.error is not None, f"{o.rid}: no explicit error ({o.transport_error or 'nothing'})"
        assert o.error.get("code") == 503 and victim in o.error.get("message", ""), (o.rid, o.error)
        assert o.ended_at - killed_at < ERROR_WITHIN_S, f"{o.rid} got its error {o.ended_at - killed_at:.1f} s late"
        assert o.problems == [], o.problems
        if o.stream:
            assert o.status == 200 and o.done_markers == 1, o  # the stream ends properly: error event, [DONE]
        else:
            assert o.status == 503, o
    return numbers


def _check_unhealthy_and_refusing(server: Server, victim: str) -> dict:
    t0 = time.monotonic()
    health = server.health()
    assert health.status_code == 503, health.text
    assert any(victim in d for d in health.json()["dead"]), health.json()
    r = httpx.post(server.url + "/generate", json={"text": "after", "sampling_params": {"max_new_tokens": 2}},
                   timeout=5)
    assert r.status_code == 503 and "died" in r.json()["message"], r.text
    return {"health_and_refusal_s": round(time.monotonic() - t0, 2)}


@pytest.fixture
def server_factory(tmp_path, model_cache):
    started: list[Server] = []

    def make(dp_size: int = 1, args: tuple[str, ...] = ()) -> Server:
        server = Server(tmp_path / f"server-{len(started)}", dp_size=dp_size,
                        extra_args=("--max-running-requests", "64", *args))
        started.append(server)
        return server.start(model_cache)

    yield make
    for server in started:  # whatever happened, nothing survives the test
        server.kill()


def test_scheduler_killed_mid_load(server_factory):
    server = server_factory(dp_size=2)
    outcomes, killed_at = asyncio.run(_load_then_kill(server, "scheduler_1"))
    numbers = _check_in_flight_requests_failed_fast("scheduler_1", outcomes, killed_at)
    numbers.update(_check_unhealthy_and_refusing(server, "scheduler_1"))
    report = server.stop(signal.SIGTERM)
    numbers["shutdown"] = report
    RESULTS["scheduler"] = numbers
    assert report == {"exit_code": 0, "hung": False, "orphans": {}, "ipc_dir_left": False}, report


def test_controller_killed_mid_load_then_server_process_killed(server_factory):
    server = server_factory()
    outcomes, killed_at = asyncio.run(_load_then_kill(server, "controller"))
    numbers = _check_in_flight_requests_failed_fast("controller", outcomes, killed_at)
    numbers.update(_check_unhealthy_and_refusing(server, "controller"))
    # Now the server process itself dies without cleaning up: the remaining children must notice
    # (parent watch) and exit, removing the IPC directory.
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait(10)
    t0 = time.monotonic()
    children = {n: p for n, p in server.info["pids"].items() if n != "controller"}
    while time.monotonic() - t0 < 10 and any(pid_alive(p) for p in children.values()):
        time.sleep(0.1)
    numbers["children_gone_after_server_sigkill_s"] = round(time.monotonic() - t0, 2)
    report = server.leftovers()
    numbers["leftovers"] = report
    RESULTS["controller"] = numbers
    assert report == {"orphans": {}, "ipc_dir_left": False}, report
    assert numbers["children_gone_after_server_sigkill_s"] < 5


def test_detokenizer_killed_mid_load_server_exits_by_itself(server_factory):
    server = server_factory(args=("--exit-on-child-death",))
    outcomes, killed_at = asyncio.run(_load_then_kill(server, "detokenizer"))
    numbers = _check_in_flight_requests_failed_fast("detokenizer", outcomes, killed_at)
    code = server.wait_exit(15)
    numbers["exit_code"] = code
    numbers["exited_after_s"] = round(time.monotonic() - killed_at, 2)
    report = server.leftovers()
    numbers["leftovers"] = report
    RESULTS["detokenizer"] = numbers
    assert code == 3, f"exit code {code}:\n{server.log_tail()}"
    assert report == {"orphans": {}, "ipc_dir_left": False}, report
    assert "engine process died: detokenizer" in server.log_text()


GRACE_S = 3.0  # the HTTP server's timeout_graceful_shutdown (reference_impl/engine/launcher.py)


async def _load_then_stop(server: Server) -> tuple[list[Outcome], float]:
    """SIGTERM the server itself in the middle of the load."""
    assert server.proc is not None
    return await _load_then(server, "stop", lambda: server.proc.send_signal(signal.SIGTERM))


def test_server_stopped_mid_load_ends_every_request_at_once(server_factory):
    server = server_factory()
    outcomes, stopped_at = asyncio.run(_load_then_stop(server))
    failed = [o for o in outcomes if not o.complete]
    assert failed, "no request was in flight when the server was stopped"
    for o in failed:
        assert o.error is not None, f"{o.rid}: no explicit error ({o.transport_error or 'nothing'})"
        assert o.error.get("code") == 503 and "shutting down" in o.error.get("message", ""), (o.rid, o.error)
        assert o.ended_at - stopped_at < GRACE_S, f"{o.rid} ended {o.ended_at - stopped_at:.1f} s after SIGTERM"
        assert o.problems == [], o.problems
        if o.stream:
            assert o.status == 200 and o.done_markers == 1, o
        else:
            assert o.status == 503, o
    report = server.stop(signal.SIGTERM)  # already stopping: waits for the exit
    RESULTS["server stopped"] = {"in_flight": len(outcomes), "ended_with_503": len(failed),
                                 "slowest_s": round(max(o.ended_at - stopped_at for o in failed), 2)}
    assert report == {"exit_code": 0, "hung": False, "orphans": {}, "ipc_dir_left": False}, report
    assert "Exception in ASGI application" not in server.log_text()


def test_zzz_report():
    """Not a check: the measured numbers, for docs/reliability.md (pytest -s shows them)."""
    for victim, numbers in RESULTS.items():
        print(f"\n[faults] {victim}: {numbers}")
