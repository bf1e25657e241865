"""The suite's pytest plugin, split by job, and what the checks import from it.

- ``hooks``: the pytest11 entry point; inert until a conformance run is asked for, then
  hands every hook to the run.
- ``options``: the one table of run options (``pytest --ipc-x``, ``ipc-conformance run --x``).
- ``checks``: ``@check`` and check ids; helpers the checks share (imported from here).
- ``verdicts``: a check's outcome after the expected-failure list, its level, harness errors.
- ``run``: the run object (session, records, reports; merging pytest-xdist workers).
- ``parallel``: how pytest-xdist shares the checks out (the E2E checks on one worker).
- ``summary``: the lines printed after a run.

Importing this package imports only the standard library.
"""

from conformance.plugin.checks import HARNESS_ERROR, PRIMITIVE_SAMPLES, check, failure_message, harness_error

__all__ = ["HARNESS_ERROR", "PRIMITIVE_SAMPLES", "check", "failure_message", "harness_error"]
