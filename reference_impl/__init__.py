"""Reference implementation of the SGLang-style IPC wire format and serving engine."""
__version__ = "0.1.0"
