"""End-to-end runs of a real serving engine: shared by the suite's E2E checks
(conformance/suite/test_e2e.py, ``ipc-conformance run --e2e``) and the engine's own tests
(tests/engine).

    harness.py   ServerProcess (start with tap + trace dirs, wait healthy, stop, report leftovers), Client
    scenario.py  the fixed request scenario every run sends, and comparable() for cross-run equality
    runs.py      run_engine(): start, scenario, stop, collect -> EngineRun
    checks.py    checks over the tapped IPC messages and the spans, as lists of failures in plain words
"""

from reference_tools.e2e.harness import Client, ServerProcess
from reference_tools.e2e.runs import EngineRun, run_engine

__all__ = ["Client", "EngineRun", "ServerProcess", "run_engine"]
