"""ipc-conformance: the conformance suite for SGLang-style IPC wire formats.

What a third party runs: ``suite`` (the checks), ``plugin`` (pytest), ``adapters`` (the API an
implementation is wrapped in, and the SGLang adapter), ``testee`` (implementations in any
language, as subprocesses), ``expectations`` (known failures per implementation), ``runner``,
``report`` and ``cli`` (``ipc-conformance``). ``schema`` is the spec tooling they share.
The reference implementation and its tools are reached only by name, through an adapter.
"""

__version__ = "0.1.0"
