"""Golden vectors as syrupy snapshots: `pytest --snapshot-update` is the golden update.

    from conformance.schema.golden.syrupy_extension import GoldenSnapshotExtension

    def test_golden_vectors(snapshot):
        golden = snapshot.use_extension(GoldenSnapshotExtension)
        assert golden(name="sglang-0.5.23") == load_manifest("sglang-0.5.23")

One snapshot per manifest (`name=` its id): the value is the manifest, serialised to every file
it needs under golden/ (its vectors, index.json, refusals.json: conformance.schema.golden.store),
and the stored snapshot is what golden/ holds for it. syrupy is the loop, not a format: the
store keeps its published form (spec/SPEC.md, "Vector files"), a vector that several manifests
share stays one pair of files, and every write goes through conformance.schema.golden.writer,
the writer `ipc-conformance golden update` uses (only the files that changed, atomically).

- A failing assertion shows the meaning-level diff of conformance.schema.golden.diff: per
  changed case its fields, old -> new value; then what the index and the refusals change.
- Vector files no index names are syrupy's unused snapshots (`N snapshots unused`, deleted by
  `--snapshot-update`); their collection is `golden/vectors/<test module>`.
- A corrupted vector (content not matching the hash in its name) or one the index names that is
  missing fails the assertion with one line naming the file, and nothing is written.

syrupy locations are keys, not files: `<golden>/<manifest id>/<test module>` and
`<golden>/vectors/<test module>` (syrupy ties a collection to the test module by that last part).
`GoldenSnapshotExtension.at(root)` is the same extension over another golden folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Optional

from syrupy.data import Snapshot, SnapshotCollection, SnapshotCollections
from syrupy.extensions.base import AbstractSyrupyExtension

from conformance.schema.golden import writer
from conformance.schema.golden.diff import index_lines, refusal_lines
from conformance.schema.golden.store import INDEX, VECTORS, expected_files, index_file, require_wire
from conformance.schema.manifest import Manifest, load_manifest

if TYPE_CHECKING:
    from syrupy.location import PyTestLocation
    from syrupy.types import PropertyFilter, PropertyMatcher, SerializableData, SerializedData, SnapshotIndex

__all__ = ["GoldenFiles", "GoldenSnapshotExtension"]


@dataclass(eq=False)
class GoldenFiles:
    """A manifest's golden files: {path relative to the golden folder: exact content}."""

    manifest_id: str
    files: dict[str, bytes]
    manifest: Optional[Manifest] = field(default=None, repr=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GoldenFiles) and self.files == other.files

    __hash__ = None  # type: ignore[assignment]


def golden_diff_lines(received: GoldenFiles, stored: Optional[GoldenFiles]) -> list[str]:
    """What golden/ would change for the manifest, in meaning: cases (fields, old -> new),
    the index's own members, the refusals, then the files an update writes and deletes."""
    mid = received.manifest_id
    if stored is None:
        return [f"golden/{mid}/ has no {INDEX}: `pytest --snapshot-update` writes its {len(received.files)} files"]
    lines: list[str] = []
    if index_file(mid) in stored.files:
        lines += index_lines(mid, stored.files, received.files)
    refusals = f"{mid}/refusals.json"
    lines += refusal_lines(refusals, stored.files.get(refusals), received.files.get(refusals))
    written = sorted(p for p in received.files if p not in stored.files)
    rewritten = sorted(p for p in received.files if p in stored.files and stored.files[p] != received.files[p])
    dropped = sorted(p for p in stored.files if p not in received.files)
    for mark, word, paths in (("+", "writes", written), ("~", "rewrites", rewritten), ("-", "drops", dropped)):
        if paths:
            shown = ", ".join(paths[:8]) + (f" and {len(paths) - 8} more" if len(paths) > 8 else "")
            lines.append(f"{mark} --snapshot-update {word} {len(paths)} file{'s' if len(paths) != 1 else ''}: {shown}")
    return lines


class GoldenSnapshotExtension(AbstractSyrupyExtension):
    """syrupy over the content-addressed golden store (see the module docstring)."""

    #: the golden folder; None: the project's (conformance.paths.golden_dir)
    golden_root: ClassVar[Optional[Path]] = None
    # each manifest's files are written as its assertion passes under --snapshot-update: an
    # error in the write fails that assertion, not the session's end
    write_immediately = True

    @classmethod
    def at(cls, root: Path) -> type[GoldenSnapshotExtension]:
        """The extension over another golden folder (a scratch copy)."""
        return type(cls.__name__, (cls,), {"golden_root": Path(root).absolute()})

    @classmethod
    def root(cls) -> Path:
        if cls.golden_root is not None:
            return cls.golden_root
        from conformance.paths import golden_dir

        return golden_dir().absolute()

    # -- serializer ---------------------------------------------------------------------
    def serialize(self, data: SerializableData, *, exclude: Optional[PropertyFilter] = None,
                  include: Optional[PropertyFilter] = None, matcher: Optional[PropertyMatcher] = None,
                  ) -> SerializedData:
        """A manifest (or its id or file) -> the files it needs under golden/."""
        manifest = data if isinstance(data, Manifest) else load_manifest(str(data))  # UsageError: one line
        require_wire(manifest)
        return GoldenFiles(manifest.id, expected_files(manifest), manifest)  # type: ignore[return-value]

    # -- storage ------------------------------------------------------------------------
    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(cls.root())

    @classmethod
    def discovery_dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(cls.root() / VECTORS)

    @classmethod
    def get_location(cls, *, test_location: PyTestLocation, index: SnapshotIndex) -> str:
        if not isinstance(index, str) or not index:
            raise writer.GoldenError("a golden snapshot is named by its manifest id: "
                                     "assert snapshot(name='sglang-0.5.23') == manifest")
        return str(cls.root() / index / test_location.basename)

    def is_snapshot_location(self, *, location: str) -> bool:
        return Path(location).parent.parent == self.root()

    def discover_snapshots(self, *, test_location: PyTestLocation,
                           ignore_extensions: Optional[list[str]] = None) -> SnapshotCollections:
        """The unused vectors (files no index names), as one collection of unused snapshots.
        Manifests' own snapshots are not listed: a test that does not assert one does not own it."""
        discovered = SnapshotCollections()
        orphans = writer.orphan_vectors(self.root())
        if orphans:
            collection = SnapshotCollection(location=str(self.root() / VECTORS / test_location.basename))
            for path in orphans:
                collection.add(Snapshot(name=path.split("/", 1)[1]))
            discovered.add(collection)
        return discovered

    def read_snapshot_collection(self, *, snapshot_location: str) -> SnapshotCollection:
        return SnapshotCollection(location=snapshot_location)

    def read_snapshot_data_from_location(self, *, snapshot_location: str, snapshot_name: str,
                                         session_id: str) -> Optional[SerializedData]:
        location = Path(snapshot_location)
        root, mid = location.parent.parent, location.parent.name
        files = writer.recorded_files(root, mid)  # GoldenError: one line naming the file
        return None if files is None else GoldenFiles(mid, files)  # type: ignore[return-value]

    @classmethod
    def write_snapshot_collection(cls, *, snapshot_collection: SnapshotCollection,
                                  name_order: Optional[dict[str, int]] = None) -> None:
        location = Path(snapshot_collection.location)
        for snapshot in snapshot_collection:
            data = snapshot.data
            if not isinstance(data, GoldenFiles):
                raise writer.GoldenError(f"not golden files: {type(data).__name__}")
            writer.write_manifest(location.parent.parent, location.parent.name, data.files)

    def delete_snapshots(self, *, snapshot_location: str, snapshot_names: set[str]) -> None:
        location = Path(snapshot_location)
        if location.parent.name == VECTORS:
            writer.delete_vectors(location.parent.parent, [f"{VECTORS}/{n}" for n in snapshot_names])

    # -- comparator and report ----------------------------------------------------------
    def matches(self, *, serialized_data: SerializableData, snapshot_data: SerializableData) -> bool:
        return isinstance(serialized_data, GoldenFiles) and serialized_data == snapshot_data

    def diff_lines(self, serialized_data: SerializedData, snapshot_data: SerializedData) -> Iterator[str]:
        if not isinstance(serialized_data, GoldenFiles):
            yield from super().diff_lines(serialized_data, snapshot_data)
            return
        stored = snapshot_data if isinstance(snapshot_data, GoldenFiles) else None
        yield from golden_diff_lines(serialized_data, stored)

    def diff_snapshots(self, serialized_data: SerializedData, snapshot_data: SerializedData) -> SerializedData:
        return "\n".join(self.diff_lines(serialized_data, snapshot_data))
