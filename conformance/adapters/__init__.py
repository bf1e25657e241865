"""Implementations under test: built-in adapters, entry points, and `module:object`."""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Callable

from .base import Adapter

ENTRY_POINT_GROUP = "ipc_conformance.adapters"


def _builtin() -> dict[str, Callable[[], Adapter]]:
    def reference() -> Adapter:
        from .reference import ReferenceAdapter

        return ReferenceAdapter()

    def sglang() -> Adapter:
        from .sglang import SGLangAdapter

        return SGLangAdapter()

    return {"reference": reference, "sglang": sglang}


def load_adapter(spec: str) -> Adapter:
    """'reference', 'sglang', an entry point name, 'package.module:object' (an Adapter
    instance, class or factory), or 'cmd:<command line>' (a testee process, spec/testee.md)."""
    builtin = _builtin()
    if spec in builtin:
        return builtin[spec]()
    if spec.startswith("cmd:"):
        from ..testee.adapter import from_spec

        return from_spec(spec)
    if ":" in spec:
        module, _, attr = spec.partition(":")
        target = getattr(importlib.import_module(module), attr)
    else:
        matches = [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == spec]
        if not matches:
            raise LookupError(f"no implementation {spec!r}: use reference, sglang, an entry point in "
                              f"{ENTRY_POINT_GROUP!r}, or module:object")
        target = matches[0].load()
    adapter = target() if callable(target) and not isinstance(target, Adapter) else target
    if not isinstance(adapter, Adapter):
        raise TypeError(f"{spec} did not give a conformance.adapters.Adapter")
    return adapter


__all__ = ["Adapter", "ENTRY_POINT_GROUP", "load_adapter"]
