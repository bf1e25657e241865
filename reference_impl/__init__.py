"""Reference implementation of the SGLang-style IPC wire format and serving engine."""
from conformance import __version__ as __version__  # one version for the distribution
