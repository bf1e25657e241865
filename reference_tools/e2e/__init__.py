"""End-to-end runs of the reference serving engine: for the reference adapter's ``run_e2e`` (what
the suite's E2E checks judge, ``ipc-conformance run --e2e``) and the engine's own tests (tests/engine).

    harness.py   ServerProcess (start with tap + trace dirs, wait healthy, stop, report leftovers), Client
    scenario.py  the fixed request scenario every run sends, and comparable() for cross-run equality
    runs.py      run_engine(): start, scenario, stop, collect -> EngineRun
    expected.py  what every run must show: the structs per IPC link, the span chain of a trace
    checks.py    the suite's judgements of tapped messages and spans (conformance/suite/tapped.py) with
                 the reference decoding, for the engine's tests, as lists of failures in plain words
"""

from reference_tools.e2e.harness import Client, ServerProcess
from reference_tools.e2e.runs import EngineRun, run_engine

__all__ = ["Client", "EngineRun", "ServerProcess", "run_engine"]
