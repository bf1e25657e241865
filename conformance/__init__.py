"""ipc-conformance: the conformance suite for SGLang-style IPC wire formats."""

__version__ = "0.1.0"
