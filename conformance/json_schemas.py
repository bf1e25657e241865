"""The JSON Schemas published under spec/schemas/, generated from the structs that read and
write those documents (so a dashboard or a testee in another language can rely on them):

- results.schema.json:  results.json of `ipc-conformance run` (conformance/records.py, Results)
- testee.schema.json:   every frame of the testee protocol (conformance/testee/frames.py)
- refusals.schema.json: golden/<manifest>/refusals.json (conformance/schema/golden/refusals.py, Corpus)

    python -m conformance.json_schemas            # exit 1, naming them, when a published file is stale
    python -m conformance.json_schemas --write    # rewrite them from the structs
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import msgspec

from conformance.paths import data_root

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _folder() -> Path:
    return data_root() / "spec" / "schemas"


def _one(kind: type, title: str, description: str) -> dict[str, Any]:
    schema = msgspec.json.schema(kind)
    return {"$schema": DRAFT, "title": title, "description": description, **schema}


def results_schema() -> dict[str, Any]:
    from conformance.records import Results

    return _one(Results, "results.json of ipc-conformance run",
                "What `ipc-conformance run --report FILE / --report-dir DIR` writes: the run's metadata, "
                "its count per outcome, the pickle residue and one record per check.")


def testee_schema() -> dict[str, Any]:
    from conformance.testee import frames

    kinds = [*frames.REQUESTS, *frames.ANSWERS]
    refs, defs = msgspec.json.schema_components(kinds, ref_template="#/$defs/{name}")
    return {"$schema": DRAFT, "title": "Frames of the ipc-conformance testee protocol",
            "description": "Each frame is one msgpack map (spec/testee.md §1); this schema describes it with "
                           "msgspec's JSON mapping, where msgpack bin (`payload`) reads as a base64 string. "
                           "Requests (runner to testee) are tagged by `type`; the answers to `start` and `stop` "
                           "are too; every other answer is a Result. $defs names one schema per frame kind.",
            "anyOf": list(refs), "$defs": defs}


def refusals_schema() -> dict[str, Any]:
    from conformance.schema.golden.refusals import Corpus

    return _one(Corpus, "golden/<manifest>/refusals.json",
                "Inputs every implementation MUST refuse (spec/SPEC.md §13.2), derived from a manifest and "
                "its golden vectors by `ipc-conformance golden update`.")


SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "results.schema.json": results_schema,
    "testee.schema.json": testee_schema,
    "refusals.schema.json": refusals_schema,
}


def text(name: str) -> str:
    """The published file's text, as generated now."""
    return json.dumps(_canonical(SCHEMAS[name]()), indent=2, ensure_ascii=False) + "\n"


def _canonical(node: Any) -> Any:
    """The same text from every supported msgspec: releases differ in how they dedent a
    docstring and in which order they list the arms of an Optional."""
    if isinstance(node, dict):
        return {k: (inspect.cleandoc(v) if k == "description" and isinstance(v, str) else
                    sorted((_canonical(a) for a in v), key=lambda a: json.dumps(a, sort_keys=True))
                    if k == "anyOf" else _canonical(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_canonical(v) for v in node]
    return node


def stale(folder: Optional[Path] = None) -> list[str]:
    """The published schemas that differ from what the structs generate (or are missing)."""
    folder = folder or _folder()
    return [name for name in SCHEMAS
            if not (folder / name).is_file() or (folder / name).read_text(encoding="utf-8") != text(name)]


def write(folder: Optional[Path] = None) -> list[str]:
    """Rewrite the stale schemas; returns their names."""
    folder = folder or _folder()
    folder.mkdir(parents=True, exist_ok=True)
    changed = stale(folder)
    for name in changed:
        (folder / name).write_text(text(name), encoding="utf-8")
    return changed


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.json_schemas",
                                     description="check (default) or rewrite the JSON Schemas in spec/schemas/")
    parser.add_argument("--write", action="store_true", help="rewrite the stale schemas from the structs")
    args = parser.parse_args(argv)
    if args.write:
        changed = write()
        print(f"schemas: rewrote {', '.join(changed)}" if changed else "schemas: up to date")
        return 0
    changed = stale()
    if changed:
        print(f"schemas: stale: {', '.join(changed)} (python -m conformance.json_schemas --write)")
        return 1
    print("schemas: up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
