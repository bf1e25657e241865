"""The conformance checks, collected by `ipc-conformance run` / `pytest --ipc-impl`."""
