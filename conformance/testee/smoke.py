"""`ipc-conformance smoke`: a few seconds to know an implementation is wired up right.

Start (for cmd: testees, the handshake), then for a handful of golden vectors: decode
the vector, encode the canonical message, round-trip it over every transport, carry a
top-level int; then stop. Run it before the full suite, as Bowtie does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

from conformance.compare import differences
from conformance.transport import Transport

__all__ = ["smoke"]


def _pick_structs(manifest: Any) -> list[str]:
    names = [s.name for s in manifest.messages]
    preferred = [n for n in ("BatchTokenIDOutput", "TokenizedGenerateReqInput", "AbortReq") if n in names]
    return preferred or names[:3]


def smoke(impl: str, manifest_id: Optional[str] = None, out: Callable[[str], None] = print) -> int:
    from conformance.adapters import check_spec, load_adapter
    from conformance.schema.golden.store import vector_paths
    from conformance.schema.manifest import load_manifest
    from conformance.schema.values import ValueBuilder
    from conformance.testee.adapter import SubprocessAdapter

    failures = 0
    passed = 0

    def step(name: str, fn: Callable[[], Optional[str]], required: bool = True) -> None:
        nonlocal failures, passed
        testee = adapter if isinstance(adapter, SubprocessAdapter) else None  # keeps its last requests
        if testee is not None:
            testee.recent.clear()
        try:
            problem = fn()
        except Exception as exc:  # noqa: BLE001 - includes skips: a smoke step must run
            problem = f"{type(exc).__name__}: {exc}"
        if problem:
            failures += required
            lines = problem.splitlines()
            out(f"{'FAIL' if required else 'warn'}  {name}: {lines[0][:300]}")
            context = [line.strip() for line in lines[1:] if line.startswith(("  step: ", "  reproduce: "))]
            if not context and testee is not None and testee.recent:  # the answers were wrong: replay the last
                context = [line.strip() for line in testee.reproducers(1).splitlines()[1:]]
            for line in context:
                out(f"      {line}")
        else:
            passed += 1
            out(f"ok    {name}")

    check_spec(impl)  # a name that resolves to nothing is the user's mistake, not a smoke failure
    try:
        adapter = load_adapter(impl)
    except Exception as exc:  # noqa: BLE001 - whatever stops the start is the first failure
        out(f"FAIL  start {impl}: {exc}")
        out("smoke: 0 ok, 1 failed")
        return 1
    try:
        language = getattr(adapter, "language", "python (in process)")
        manifest = load_manifest(manifest_id or adapter.manifest_id() or "sglang-0.5.23")
        out(f"ok    start: {adapter.label} ({language}), claims {manifest.id}, "
            f"transports {', '.join(adapter.transports)}"
            + (f", ops {', '.join(sorted(adapter.ops))}" if hasattr(adapter, "ops") else ""))
        classes = adapter.classes()
        vectors = vector_paths(manifest.id)

        def instance(struct: str, variant: str) -> Any:
            return ValueBuilder(manifest, classes, variant).instance(struct)

        for struct in _pick_structs(manifest):
            for variant in ("minimal", "edge"):
                path = vectors.get((struct, variant))
                if path is None or "msgpack" not in adapter.transports:
                    continue

                def decodes(path: Path = path, struct: str = struct, variant: str = variant) -> Optional[str]:
                    diffs = differences(instance(struct, variant), adapter.decode(path.read_bytes(), "msgpack"))
                    return "; ".join(diffs[:3]) or None

                def encodes(path: Path = path, struct: str = struct, variant: str = variant) -> Optional[str]:
                    got = adapter.encode(instance(struct, variant), "msgpack")
                    return None if got == path.read_bytes() else f"{len(got)} bytes differ from the golden vector"

                step(f"decode golden {struct}.{variant}", decodes)
                step(f"encode golden {struct}.{variant} (recommended)", encodes, required=False)
            for transport in adapter.transports:
                def roundtrip(struct: str = struct, transport: Transport = transport) -> Optional[str]:
                    value = instance(struct, "typical")
                    again = adapter.decode(adapter.encode(value, transport), transport)
                    diffs = differences(instance(struct, "typical"), again)
                    return "; ".join(diffs[:3]) or None

                step(f"round trip {struct}.typical over {transport}", roundtrip)
        for transport in adapter.transports:
            def top_level_int(t: Transport = transport) -> Optional[str]:
                return None if adapter.decode(adapter.encode(-(2**63), t), t) == -(2**63) else "changed"

            step(f"top-level int over {transport}", top_level_int)
    finally:
        close = getattr(adapter, "close", None)
        if close is not None:
            try:
                close()
                passed += 1
                out("ok    stop")
            except Exception as exc:  # noqa: BLE001 - a stop that fails in any way is a failed step
                failures += 1
                out(f"FAIL  stop: {exc}")
    out(f"smoke: {passed} ok, {failures} failed")
    return 1 if failures else 0
