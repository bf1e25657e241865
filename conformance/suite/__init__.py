"""The conformance checks, collected by `ipc-conformance run` / `pytest --ipc-impl`: one
``test_<area>.py`` module per check area. They reach the implementation only through its adapter.

Shared helpers (no checks): ``capability.py`` (skip up front when a capability is not declared),
``fields.py`` (where the manifest puts what a check needs; PickleWrappers left in a value),
``vectors.py`` (the bundled golden vectors), ``tapped.py`` (judging an E2E run's recorded facts),
``failure.py`` (the one failure message: step, input, paths, requirement).
"""
