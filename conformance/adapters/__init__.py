"""Implementations under test: built-in adapters, entry points, and `module:object`."""

from __future__ import annotations

import importlib
import importlib.metadata

from conformance.adapters.base import CAPABILITIES, Adapter, unknown_capabilities

ENTRY_POINT_GROUP = "ipc_conformance.adapters"


#: The implementations this package ships, by name: an import path each, so that the suite
#: imports an implementation only when it is asked for (the reference lives in reference_tools).
BUILTIN = {
    "reference": "reference_tools.adapter:ReferenceAdapter",
    "sglang": "conformance.adapters.sglang:SGLangAdapter",
}


def load_adapter(spec: str) -> Adapter:
    """'reference', 'sglang', an entry point name, 'package.module:object' (an Adapter
    instance, class or factory), or 'cmd:<command line>' (a testee process, spec/testee.md)."""
    spec = BUILTIN.get(spec, spec)
    if spec.startswith("cmd:"):
        from conformance.testee.adapter import from_spec

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
    unknown = unknown_capabilities(adapter.capabilities)
    if unknown:
        raise ValueError(f"{adapter.label} declares capabilities {unknown} that are not in the vocabulary "
                         f"({', '.join(sorted(CAPABILITIES))})")
    return adapter


__all__ = ["CAPABILITIES", "Adapter", "BUILTIN", "ENTRY_POINT_GROUP", "load_adapter"]
