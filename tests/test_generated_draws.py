"""Generated checks under the `ci` profile draw what their check id and manifest decide:
the same implementation reached through another adapter class, defined in another
module, draws exactly the same values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conformance import profiles
from conformance.schema.manifest import load_manifest

SELECT = "Generated and (BatchEmbeddingOutput or TokenizedEmbeddingReqInput or AbortReq)"

# A third party's adapter module: its own literals are the kind of thing Hypothesis mines
# from local modules into its pool of constants.
SUBCLASS_MODULE = '''
from reference_tools.adapter import ReferenceAdapter

LIMITS = {"max_tokens": 8191, "scale": 0.3333, "name": "third-party-adapter", "raw": b"\\\\x07\\\\x08"}
MAGIC = [-7, 65537, 2.5e-3, "rid-prefix", "fp8"]


class ThirdPartyReference(ReferenceAdapter):
    """The reference implementation, reached through a subclass defined elsewhere."""
'''


def _draws(impl: str, folder: Path, extra_path: str = "") -> list[tuple[str, str]]:
    record = folder / f"draws-{impl.replace(':', '_')}.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (extra_path, os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", impl, "--hypothesis-profile", "ci",
         "--", "-k", SELECT, "--ipc-record-draws", str(record)],
        capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return [(r["id"], r["draw"]) for r in map(json.loads, record.read_text().splitlines())]


def test_a_subclass_in_another_module_draws_what_the_reference_draws(tmp_path):
    (tmp_path / "third_party_adapter.py").write_text(SUBCLASS_MODULE)
    reference = _draws("reference", tmp_path)
    subclass = _draws("third_party_adapter:ThirdPartyReference", tmp_path, extra_path=str(tmp_path))
    # 3+ structs x (RoundTrip.pickle, .msgpack, CrossTransport)
    assert len({check_id for check_id, _ in reference}) >= 9
    assert len(reference) >= 9 * 5
    assert subclass == reference


def test_seed_depends_on_check_id_and_manifest_types_only():
    manifest = load_manifest("sglang-0.5.23")
    renamed = load_manifest("sglang-0.5.23")
    renamed.module, renamed.implementation = "somewhere.else", "other"
    check_id = "Required.Generated.AbortReq.RoundTrip.msgpack"
    assert profiles.seed_for(check_id, manifest) == profiles.seed_for(check_id, renamed)
    assert profiles.seed_for(check_id, manifest) != profiles.seed_for(check_id.replace("msgpack", "pickle"), manifest)
    assert profiles.seed_for(check_id, manifest) != profiles.seed_for(check_id, load_manifest("sglang-0.5.22"))
