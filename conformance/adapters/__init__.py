"""Implementations under test: built-in adapters, entry points, and `module:object`."""

from __future__ import annotations

import importlib
import importlib.metadata

from conformance.adapters.base import CAPABILITIES, Adapter, unknown_capabilities
from conformance.errors import UsageError

ENTRY_POINT_GROUP = "ipc_conformance.adapters"


#: The implementations installed with this package, found by name through ENTRY_POINT_GROUP
#: (pyproject.toml): the suite imports an implementation only when it is asked for, and never
#: names one in its code (the reference lives in reference_tools, with the `reference` extra).
KNOWN = ("reference", "sglang")

#: The extra that installs what a named implementation needs.
EXTRAS = {"reference": "reference"}


def load_adapter(spec: str) -> Adapter:
    """'reference', 'sglang', an entry point name, 'package.module:object' (an Adapter
    instance, class or factory), or 'cmd:<command line>' (a testee process, spec/testee.md).
    A spec that names nothing loadable, or a testee that does not start, is a UsageError."""
    named = spec
    if named.startswith("cmd:"):
        from conformance.testee.adapter import TesteeRuntimeError, from_spec

        try:
            return from_spec(named)
        except TesteeRuntimeError as exc:
            raise UsageError(f"--impl {spec!r}: {exc}") from None
    try:
        adapter = _instance(spec, _target(spec, named))
    except ModuleNotFoundError as exc:  # the implementation's own imports (torch for the reference)
        raise _missing(spec, exc) from None
    unknown = unknown_capabilities(adapter.capabilities)
    if unknown:
        raise UsageError(f"{adapter.label} declares capabilities {unknown} that are not in the vocabulary "
                         f"({', '.join(sorted(CAPABILITIES))})")
    return adapter


def check_spec(spec: str) -> None:
    """The checks of load_adapter that need no implementation started: the name resolves, its
    module imports, its object exists; a testee's program exists. Raises UsageError."""
    named = spec
    if named.startswith("cmd:"):
        import shutil

        from conformance.testee.adapter import command_argv

        try:
            argv = command_argv(named.removeprefix("cmd:"))
        except ValueError as exc:
            raise UsageError(f"--impl {spec!r}: the command line does not parse: {exc}") from None
        if not argv or shutil.which(argv[0]) is None:
            raise UsageError(f"--impl {spec!r}: no program {argv[0] if argv else ''!r} on PATH "
                             f"(give the testee's command line after cmd:)")
        return
    _target(spec, named)


def _target(spec: str, named: str) -> object:
    if ":" not in named:
        entry_points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
        matches = [ep for ep in entry_points if ep.name == named]
        if not matches:
            names = sorted({*KNOWN, *(ep.name for ep in entry_points)})
            raise UsageError(f"no implementation {spec!r}: use {', '.join(names)} (entry points in "
                             f"{ENTRY_POINT_GROUP!r}), module:object, or cmd:<testee command line>")
        try:
            return matches[0].load()
        except ModuleNotFoundError as exc:
            raise _missing(spec, exc) from None
    module, _, attr = named.partition(":")
    try:
        loaded = importlib.import_module(module)
    except ImportError as exc:
        raise UsageError(f"--impl {spec!r}: cannot import {module!r}: {exc}") from None
    try:
        return getattr(loaded, attr)
    except AttributeError:
        raise UsageError(f"--impl {spec!r}: module {module!r} has no {attr!r}") from None


def _missing(spec: str, exc: ModuleNotFoundError) -> UsageError:
    """One line for an implementation whose dependencies are not installed, naming the extra."""
    missing = exc.name or str(exc)
    extra = EXTRAS.get(spec) or ("reference" if missing.split(".")[0] == "torch" else None)
    hint = f": pip install 'ipc-conformance[{extra}]'" if extra else ""
    return UsageError(f"--impl {spec!r} needs {missing!r}, which is not installed{hint}")


def _instance(spec: str, target: object) -> Adapter:
    adapter = target() if callable(target) and not isinstance(target, Adapter) else target
    if not isinstance(adapter, Adapter):
        raise UsageError(f"--impl {spec!r} gave a {type(adapter).__name__}, not a conformance.adapters.Adapter")
    return adapter


__all__ = ["CAPABILITIES", "EXTRAS", "KNOWN", "Adapter", "ENTRY_POINT_GROUP", "check_spec", "load_adapter"]
