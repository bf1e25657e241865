"""Reference implementation of the SGLang-style IPC wire format and serving engine."""
