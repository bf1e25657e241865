"""One end-to-end run: start a server with its IPC tap on, send the scenario, stop it, collect.

run_engine() returns an EngineRun with the scenario's responses, every IPC message the tap
recorded, the exported spans, the shutdown report and timings. The server is stopped (with a
signal; killed with its process group if it hangs) before the run is returned, so callers that
run one after another never have two servers at a time (2-core machines).
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from reference_tools.e2e.harness import ServerProcess


@dataclass
class EngineRun:
    name: str
    transport: str
    dp_size: int
    info: dict = field(default_factory=dict)
    scenario_results: dict = field(default_factory=dict)
    scenario_error: str = ""
    records: list = field(default_factory=list)
    spans: list = field(default_factory=list)
    shutdown: dict = field(default_factory=dict)
    fault: dict = field(default_factory=dict)
    log: str = ""
    timings: dict = field(default_factory=dict)

    @property
    def results(self) -> dict:
        """The scenario's responses; a check that needs them fails if the scenario did not finish
        (checks of the tap and the spans still run on what was recorded)."""
        if self.scenario_error:
            import pytest

            pytest.fail(f"the scenario of run {self.name} failed: {self.scenario_error}", pytrace=False)
        return self.scenario_results

    def timing_line(self) -> str:
        t = self.timings
        return (f"{self.name:38s} startup {t.get('startup_s', 0):5.1f} s  scenario {t.get('scenario_s', 0):5.1f} s  "
                f"shutdown {t.get('shutdown_s', 0):4.1f} s  {len(self.records)} IPC messages, {len(self.spans)} spans")


Step = Callable[[ServerProcess], dict]


def run_engine(name: str, transport: str, dp_size: int, launch: Callable[[], ServerProcess], *,
               scenario: Optional[Step] = None, fault: Optional[Step] = None,
               stop_signal: int = signal.SIGTERM) -> EngineRun:
    """launch() starts the server (raising, with nothing left running, when it does not come up);
    then the scenario (default: scenario.run_scenario) and the optional fault step run; a failing
    scenario is recorded, not raised, so the tap and the spans are still checked."""
    from reference_impl.engine.tap import read_tap
    from reference_impl.engine.tracing import read_spans

    if scenario is None:
        from reference_tools.e2e.scenario import run_scenario as scenario
    run = EngineRun(name, transport, dp_size)
    t0 = time.monotonic()
    server = launch()
    run.timings["startup_s"] = time.monotonic() - t0
    try:
        run.info = server.info
        t0 = time.monotonic()
        try:
            run.scenario_results = scenario(server)
            if fault is not None:
                run.fault = fault(server)
        except Exception as exc:  # noqa: BLE001 - keep going: the tap and the spans are checked anyway
            run.scenario_error = f"{exc!r}\n--- server log ---\n{server.log_tail(30)}"
        run.timings["scenario_s"] = time.monotonic() - t0
    except BaseException:
        server.kill()
        raise
    finally:
        t0 = time.monotonic()
        run.shutdown = server.stop(stop_signal)
        run.timings["shutdown_s"] = time.monotonic() - t0
    run.log = server.log_text()
    run.records = read_tap(server.tap_dir)
    run.spans = read_spans(server.trace_dir) if server.trace_dir.exists() else []
    return run
