"""Golden vectors: canonical messages of every manifest as exact msgpack bytes + JSON views.

    ipc-conformance golden update [--manifest ID]   rewrite golden/ (CI never does)
    ipc-conformance golden check  [--manifest ID]   exit 1 when golden/ is stale
    ipc-conformance golden diff OLD NEW             what changes in the vectors, for a reviewer

The layout and both file formats are specified in spec/SPEC.md ("Vector files").
"""

from conformance.schema.golden.checking import check
from conformance.schema.golden.store import (
    INDEX,
    UPDATE_COMMAND,
    Case,
    Problem,
    cases,
    expected_files,
    manifest_digest,
    read_index,
    vector_paths,
)
from conformance.schema.golden.view import ViewError, dumps, from_view, loads, to_view
from conformance.schema.golden.writer import update

__all__ = [
    "INDEX", "UPDATE_COMMAND", "Case", "Problem", "ViewError", "cases", "check", "dumps", "expected_files",
    "from_view", "loads", "manifest_digest", "read_index", "to_view", "update", "vector_paths",
]
