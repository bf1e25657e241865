"""Which bundled release an installed implementation runs against.

A run checks an implementation against a manifest and judges its failures with an
expected-failure list, both keyed by `<implementation>-<version>`. A released install finds
both. A development install (`0.5.24.dev0`, `0.5.23+local`) finds neither: it runs against its
own live catalogue, with the expected-failure list of the NEAREST bundled release (the newest
one not newer than it, else the oldest), and the run header says so. `--manifest` and
`--expectations` choose explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

__all__ = ["Choice", "choose", "nearest_release", "split_id"]


def split_id(manifest_id: str) -> tuple[str, str]:
    """('sglang', '0.5.23') from 'sglang-0.5.23' (the version is after the last '-' before a digit)."""
    for i in range(len(manifest_id) - 1, 0, -1):
        if manifest_id[i] == "-" and manifest_id[i + 1:i + 2].isdigit():
            return manifest_id[:i], manifest_id[i + 1:]
    return manifest_id, ""


def _key(version: str) -> tuple:
    from conformance.schema.diff import _version_key

    return _version_key(version)


def nearest_release(implementation: str, version: str, bundled: Iterable[str]) -> Optional[str]:
    """The bundled id of `implementation` nearest `version`: the newest release not newer than it
    (0.5.24.dev0 and 0.5.23+local -> 0.5.23), else the oldest one; None when none is bundled."""
    releases = sorted((v for impl, v in map(split_id, bundled) if impl == implementation and v), key=_key)
    if not releases:
        return None
    older = [v for v in releases if _key(v) <= _key(version)]
    return f"{implementation}-{older[-1] if older else releases[0]}"


@dataclass(frozen=True)
class Choice:
    """What a run of one installed version uses when nothing is given explicitly."""

    manifest: Optional[str]  # a bundled id; None: the implementation's live catalogue
    expectations: Optional[str]  # the label of the bundled expected-failure list, None: no list
    note: str = ""  # the run header's line ('' for a release that is bundled)


def choose(manifest_id: str, bundled_manifests: Iterable[str], bundled_lists: Iterable[str]) -> Choice:
    """The manifest and expected-failure list for an implementation that claims `manifest_id`
    (e.g. 'sglang-0.5.24.dev0'), given the bundled manifest ids and expected-failure list labels."""
    manifests, lists = list(bundled_manifests), list(bundled_lists)
    implementation, version = split_id(manifest_id)
    if manifest_id in manifests:
        return Choice(manifest_id, manifest_id if manifest_id in lists else None)
    nearest = nearest_release(implementation, version, manifests)
    if nearest is None:
        return Choice(None, None, f"{manifest_id}: no bundled release of {implementation}; running against its "
                                  f"live catalogue, with no expected-failure list")
    listed = nearest in lists
    expected = f"the expected failures of {nearest}" if listed else f"no expected-failure list ({nearest} has none)"
    return Choice(None, nearest if listed else None,
                  f"{manifest_id} is not a bundled release: running against its live catalogue, with {expected}, "
                  f"the nearest bundled release (choose with --manifest ID|PATH --expectations ID|PATH)")
