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

from conformance.schema.manifest.identity import nearest_release, split_id

__all__ = ["Choice", "choose", "nearest_release", "split_id"]


@dataclass(frozen=True)
class Choice:
    """What a run of one installed version uses when nothing is given explicitly."""

    manifest: Optional[str]  # a bundled id; None: the implementation's live catalogue
    expectations: Optional[str]  # the label of the bundled expected-failure list, None: no list
    note: str = ""  # the run header's line ('' for a release that is bundled)
    nearest: Optional[str] = None  # a development install: the bundled release it is compared with


def choose(manifest_id: str, bundled_manifests: Iterable[str], bundled_lists: Iterable[str]) -> Choice:
    """The manifest and expected-failure list for an implementation that claims `manifest_id`
    (e.g. 'sglang-0.5.24.dev0'), given the bundled manifest ids and expected-failure list labels."""
    manifests, lists = list(bundled_manifests), list(bundled_lists)
    implementation, version = split_id(manifest_id)
    if manifest_id in manifests:
        if manifest_id in lists:
            return Choice(manifest_id, manifest_id)
        # a bundled release without a list of its own (only some are run against the real thing):
        # the nearest release's known defects are the best guess, said so
        nearest_list = nearest_release(implementation, version, lists)
        if nearest_list is None:
            return Choice(manifest_id, None)
        return Choice(manifest_id, nearest_list,
                      f"{manifest_id} has no expected-failure list of its own: using {nearest_list}'s, the nearest "
                      f"(choose with --expectations ID|PATH)")
    nearest = nearest_release(implementation, version, manifests)
    if nearest is None:
        return Choice(None, None, f"{manifest_id}: no bundled release of {implementation}; running against its "
                                  f"live catalogue, with no expected-failure list")
    listed = nearest if nearest in lists else nearest_release(implementation, version, lists)
    expected = f"the expected failures of {listed}" if listed else "no expected-failure list (none is bundled)"
    note = (f"{manifest_id} is not a bundled release: running against its live catalogue, with {expected}, "
            f"the nearest bundled release (choose with --manifest ID|PATH --expectations ID|PATH)")
    return Choice(None, listed, note, nearest=nearest)
