"""Load: 1024 concurrent requests (half streaming) against a real server, under both transports.

Loopback only, bounded count (1024 per burst) and time (hard limit per test). Every request
must get a complete answer or an explicit error - none lost, none answered twice or under
another rid - and memory must come back: a second identical burst may not grow the
processes' resident memory (the first one warms allocators and caches), and the tokenizer
manager's bookkeeping must be empty again.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from .server import Server, burst, summarize

pytestmark = pytest.mark.reliability
TEST_TIMEOUT_S = 420

CONCURRENCY = int(os.environ.get("IPC_RELIABILITY_CONCURRENCY", "1024"))  # smaller for a quick local run
MAX_NEW_TOKENS = 4
# Growth of the total resident memory of all processes allowed from the end of the first burst
# to the end of the second (same load): allocator noise (measured: a few MiB either way), not a
# leak. A leak of 32 KiB per request (32 MiB per burst) fails it.
RSS_SLACK_BYTES = 24 << 20

RESULTS: dict = {}  # transport -> numbers, printed at the end (docs/reliability.md quotes them)


@pytest.fixture(scope="module", params=["msgpack", "pickle"])
def loaded_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, model_cache):
    server = Server(tmp_path_factory.mktemp(f"load-{request.param}"), transport=request.param,
                    extra_args=("--max-running-requests", "32"))
    server.start(model_cache)
    try:
        yield server
    finally:
        report = server.stop()
        RESULTS.setdefault(request.param, {})["shutdown"] = report


def _settled_rss(server: Server) -> int:
    time.sleep(1.0)
    return sum(server.rss().values())


def test_1024_concurrent_requests_all_answered_none_lost_memory_back(loaded_server: Server):
    server = loaded_server
    numbers = RESULTS.setdefault(server.transport, {})
    before = sum(server.rss().values())
    rounds = []
    for round_no in (1, 2):
        t0 = time.monotonic()
        outcomes = asyncio.run(burst(server.url, CONCURRENCY, max_new_tokens=MAX_NEW_TOKENS,
                                     prefix=f"{server.transport}-r{round_no}"))
        elapsed = time.monotonic() - t0
        summary = summarize(outcomes)
        summary.update(seconds=round(elapsed, 1), requests_per_s=round(CONCURRENCY / elapsed, 1),
                       rss_after=_settled_rss(server))
        rounds.append(summary)
        failures = [o for o in outcomes if not o.complete]
        assert summary["complete"] == CONCURRENCY, (
            f"round {round_no}: {summary}; first failures: "
            + "; ".join(f"{o.rid}: {o.error or o.transport_error}" for o in failures[:5]))
        assert summary["distinct_rids"] == CONCURRENCY
        assert summary["duplicate_rids_answered"] == 0 and summary["wrong_rid_answered"] == 0, summary
        assert summary["protocol_problems"] == [], summary["protocol_problems"]
        for o in outcomes:
            assert len(o.output_ids) == MAX_NEW_TOKENS and o.meta["completion_tokens"] == MAX_NEW_TOKENS, o
    info = server.server_info()
    numbers.update(rss_before=before, rounds=rounds, in_flight_after=info["in_flight"])
    assert info["in_flight"] == {"requests": 0, "control": 0}, info["in_flight"]
    assert server.health().status_code == 200
    grown = rounds[1]["rss_after"] - rounds[0]["rss_after"]
    allowed = RSS_SLACK_BYTES
    numbers["rss_growth_second_round"] = grown
    assert grown <= allowed, (f"resident memory grew by {grown / 2**20:.1f} MiB over a second identical burst "
                              f"(allowed {allowed / 2**20:.1f} MiB): {server.rss()}")


def test_zzz_report(request: pytest.FixtureRequest):
    """Not a check: the measured numbers, for docs/reliability.md (pytest -s shows them)."""
    for transport, numbers in RESULTS.items():
        for i, r in enumerate(numbers.get("rounds", []), 1):
            print(f"\n[load] {transport} round {i}: {r['complete']}/{r['requests']} complete, "
                  f"{r['explicit_errors']} errors, {r['no_answer']} unanswered, {r['seconds']} s "
                  f"({r['requests_per_s']} req/s), slowest {r['max_seconds']} s, RSS {r['rss_after'] / 2**20:.0f} MiB")
        if "rss_growth_second_round" in numbers:
            print(f"[load] {transport}: RSS before {numbers['rss_before'] / 2**20:.0f} MiB, growth over round 2 "
                  f"{numbers['rss_growth_second_round'] / 2**20:+.1f} MiB, "
                  f"in flight after {numbers['in_flight_after']}")
