"""`ipc-conformance schema check`: one command for a schema change.

    ipc-conformance schema check [--source PATH | --impl NAME | --manifest FILE]
                                 [--against ID|FILE] [--fail-on BREAKING|NOT_FULL|NEVER]
                                 [--allow STRUCT[.FIELD][:RULE] ...] [--allow-file FILE]
                                 [--golden-out DIR] [--json FILE]

Gets the live catalogue (read statically from source, extracted from an installed
implementation, or a manifest file), gives it its own id when it differs from the release it
claims to be (conformance.schema.manifest.identity), diffs it against the baseline (by default
the nearest bundled release, conformance.releases), proves each verdict by bytes (the machinery
of `schema verify`, conformance.schema.evolution) and prints one row per change: struct, change,
msgpack verdict, pickle verdict, rule, proof. Exit status: 0 the policy holds, 1 it does not
(an undeclared change it forbids, or a verdict the bytes contradict), 2 a user mistake.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from conformance.errors import UsageError
from conformance.schema.diff import BREAKING, FULL, Change, Diff, diff
from conformance.schema.manifest import Manifest

__all__ = ["POLICIES", "Allowance", "Report", "Row", "baseline_for", "check", "live_catalogue",
           "live_differs_line", "parse_allowances", "render_text", "to_dict", "write_golden"]

#: --fail-on: which verdicts fail the check (on either transport).
POLICIES = ("BREAKING", "NOT_FULL", "NEVER")
CONFIRM, CONTRADICT, UNSENT = "bytes confirm", "bytes contradict", "not on the wire"
DEFAULT_ALLOW_FILE = ".ipc-schema-allow"


@dataclass
class Row:
    """One change of the diff, with what the bytes said about its subject."""

    struct: str  # "Struct" or "Struct.field" (an enum: "Enum.MEMBER"; the union: "<union>")
    change: str
    msgpack: str
    pickle: str
    rule: str
    proof: str  # CONFIRM | CONTRADICT | UNSENT
    evidence: str = ""  # what contradicts, when the bytes do
    declared: bool = False  # allowed by --allow / --allow-file

    @property
    def subject(self) -> str:
        return self.struct.split(".", 1)[0]


@dataclass(frozen=True)
class Allowance:
    """A declared change: STRUCT[.FIELD][:RULE]; it covers the rows it names."""

    struct: str
    field: Optional[str] = None
    rule: Optional[str] = None

    def covers(self, row: Row) -> bool:
        name, _, fname = row.struct.partition(".")
        return (name == self.struct and (self.field is None or self.field == fname)
                and (self.rule is None or self.rule == row.rule))


@dataclass
class Report:
    live: str
    against: str
    rows: list[Row]
    policy: str
    violations: list[Row] = field(default_factory=list)
    golden: dict[str, Any] = field(default_factory=dict)
    identity: str = ""  # where the live version and the baseline came from (the line under the header)

    @property
    def exit_code(self) -> int:
        return 1 if self.violations else 0


# -- the two catalogues --------------------------------------------------------------
def live_catalogue(*, source: Optional[str] = None, manifest: Optional[str] = None,
                   implementation: Optional[Manifest] = None, module: Optional[str] = None,
                   version: Optional[str] = None) -> Manifest:
    """The catalogue under review, by its own id: read from source (never imported), a manifest
    file, or an implementation's live catalogue (`--impl`: the command line asks its adapter).
    With source: `module` names the catalogue module, `version` the tree's version (default: its
    version file, else git)."""
    from conformance.schema.manifest import load_manifest
    from conformance.schema.manifest.identity import own_identity

    given = [n for n, v in (("--source", source), ("--manifest", manifest), ("--impl", implementation))
             if v is not None]
    if len(given) != 1:
        raise UsageError("give one of --source PATH, --impl NAME, --manifest FILE" +
                         (f" (got {' and '.join(given)})" if given else ""))
    for flag, value in (("--module", module), ("--version", version)):
        if value is not None and source is None:
            raise UsageError(f"{flag} goes with --source (it names what a source tree does not say)")
    if source is not None:
        live = _from_source(source, module, version)
    elif manifest is not None:
        live = load_manifest(manifest)
    else:
        assert implementation is not None  # one of the three was given
        live = implementation
    return own_identity(live)


def _from_source(path: str, module: Optional[str] = None, version: Optional[str] = None) -> Manifest:
    from conformance.schema.manifest.extract import UnsupportedTypeError
    from conformance.schema.manifest.source import extract_source

    if not Path(path).exists():
        raise UsageError(f"--source {path!r}: no such file or folder")
    if version is not None:
        _check_version(version)
    try:
        live = extract_source(path, module=module, version=version, array_typecode="q")
        if version is not None:
            live.extracted_with["version_from"] = "--version"
        return live
    except (UnsupportedTypeError, SyntaxError, ValueError, OSError) as exc:
        raise UsageError(f"--source {path!r}: {exc}") from None


def _check_version(version: str) -> None:
    from packaging.version import InvalidVersion, Version

    try:
        Version(version)
    except InvalidVersion:
        raise UsageError(f"--version {version!r}: not a PEP 440 version (0.5.24, 0.5.24.dev3+g1a2b3c4d)") from None


def baseline_for(live: Manifest, against: Optional[str] = None) -> Manifest:
    """--against (a bundled id or a manifest file), else the bundled release nearest the live
    catalogue (nearest_baseline)."""
    from conformance.schema.manifest import load_manifest

    return load_manifest(against or nearest_baseline(live)[0])


def version_known(live: Manifest) -> bool:
    """Whether the catalogue states a release version (a tree whose version nobody could tell,
    or git knew only by its commit, says `0`, `0+g<commit>`)."""
    return live.version.split("+", 1)[0] not in ("", "0")


def nearest_baseline(live: Manifest) -> tuple[str, str]:
    return _nearest_baseline(live.id, live.to_json())


@lru_cache(maxsize=8)
def _nearest_baseline(live_id: str, live_json: bytes) -> tuple[str, str]:
    import msgspec

    return _choose_baseline(msgspec.json.decode(live_json, type=Manifest))


def _choose_baseline(live: Manifest) -> tuple[str, str]:
    """(the bundled release to check `live` against, why): never a dataclass catalogue (no msgpack
    form: `schema diff` gives its migration report; ask for one with --against). By version: the
    newest msgspec-era release of the implementation not newer than it, else its oldest one. When
    the version is unknown, or the implementation (a fork's distribution) has no bundled release:
    the msgspec-era release closest in content (fewest changes; the newest of a tie), among those
    of the implementation, else of the package the catalogue module is in, else all."""
    from conformance.schema.manifest import load_manifest, wire_manifests
    from conformance.schema.manifest.identity import nearest_release, split_id

    wire = wire_manifests()
    own = [m for m in wire if split_id(m)[0] == live.implementation]
    if own and version_known(live):
        nearest = nearest_release(live.implementation, live.version, own)
        assert nearest is not None  # own is not empty
        return nearest, "the msgspec-era release nearest its version"
    package = live.module.split(".", 1)[0]
    pool = own or [m for m in wire if split_id(m)[0] == package] or wire
    if not pool:
        raise UsageError(f"no bundled msgspec-era release to check {live.id} against: give --against ID|FILE")
    from conformance.schema.diff import _version_key

    newest_first = sorted(pool, key=lambda m: _version_key(split_id(m)[1]), reverse=True)
    counted = sorted(((len(diff(load_manifest(m), live).changes), m) for m in newest_first), key=lambda c: c[0])
    why = "its version is unknown" if not version_known(live) else f"no bundled release of {live.implementation}"
    return counted[0][1], f"the msgspec-era release closest in content ({counted[0][0]} change(s); {why})"


# -- rows: the diff, proven by bytes ---------------------------------------------------
def check(live: Manifest, baseline: Manifest, *, prove: bool = True, modules: bool = True) -> list[Row]:
    """One row per change from baseline to live; with prove, each subject's exchanges of
    `schema verify` (per message, and per changed struct or enum alone) decide its proof.
    modules=False: each class of the live catalogue counts as living where the baseline keeps
    it (another implementation of the catalogue, such as a generated one, has its own modules)."""
    if not modules:
        live = in_baseline_modules(live, baseline)
    result = diff(baseline, live)
    exchanges: dict[str, list[Any]] = {}
    if prove and result.changes:
        from conformance.schema.evolution import verify

        try:
            verification = verify(baseline, live)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        for e in verification.changes + verification.exchanges:
            exchanges.setdefault(e.message, []).append(e)
    # a struct only one side has is carried by messages: their exchanges are its proof
    carried = {n: [e for m in result.carried_by.get(n, []) for e in exchanges.get(m, [])] for n in result.carried_by}
    rows = [_row(c, exchanges.get(c.subject) or carried.get(c.subject, []), prove) for c in result.changes]
    named = {r.subject for r in rows}
    for subject, found in sorted(exchanges.items()):  # a message contradicted with no change of its own
        bad = [e for e in found if e.contradiction]
        if bad and subject not in named:
            rows.append(Row(subject, "carries a changed struct", bad[0].expected, bad[0].expected,
                            ", ".join(bad[0].rules) or "-", CONTRADICT, f"{bad[0].line()}: {bad[0].contradiction}"))
    return rows


def in_baseline_modules(live: Manifest, baseline: Manifest) -> Manifest:
    import msgspec

    def moved(specs: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
        return {n: msgspec.structs.replace(s, module=known[n].module) if n in known else s for n, s in specs.items()}

    return msgspec.structs.replace(live, structs=moved(live.structs, baseline.structs),
                                   enums=moved(live.enums, baseline.enums))


def _row(change: Change, exchanges: list[Any], proved: bool) -> Row:
    struct = change.subject + (f".{change.field}" if change.field else "")
    bad = [e for e in exchanges if e.contradiction]
    if bad:
        proof, evidence = CONTRADICT, f"{bad[0].message} {bad[0].direction} {bad[0].transport}: {bad[0].contradiction}"
    else:
        proof, evidence = (CONFIRM if exchanges else UNSENT) if proved else "not proven", ""
    return Row(struct, change.detail, change.msgpack, change.pickle, change.rule, proof, evidence)


def forbidden(row: Row, policy: str) -> bool:
    """Whether --fail-on `policy` forbids the row (either transport), or its proof fails."""
    if policy == "NEVER":
        return False
    if row.proof == CONTRADICT:
        return True
    levels = (row.msgpack, row.pickle)
    return BREAKING in levels if policy == "BREAKING" else any(level != FULL for level in levels)


def identity_line(live: Manifest, baseline: Manifest, against: Optional[str]) -> str:
    """Where the live catalogue's version and the baseline came from, in one line."""
    how = live.extracted_with.get("version_from")
    chosen = f"--against {against}" if against else nearest_baseline(live)[1]
    return f"identity: {live.id}" + (f" (version from {how})" if how else "") + f"; baseline {baseline.id}: {chosen}"


def judge(live: Manifest, baseline: Manifest, rows: list[Row], policy: str,
          allowances: Sequence[Allowance] = ()) -> Report:
    for row in rows:
        row.declared = any(a.covers(row) for a in allowances)
    bad = [r for r in rows if forbidden(r, policy) and not r.declared]
    return Report(live.id, baseline.id, rows, policy, bad)


def parse_allowances(specs: Iterable[str], where: str = "--allow") -> list[Allowance]:
    """STRUCT[.FIELD][:RULE] each (a '#' starts a comment in a file; blank lines are ignored)."""
    from conformance.schema.diff import RULES

    out = []
    for number, raw in enumerate(specs, 1):
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        target, _, rule = text.partition(":")
        struct, _, fname = target.strip().partition(".")
        declared = rule.strip() or None
        if not struct or (declared is not None and declared not in RULES):
            raise UsageError(f"{where}:{number}: {raw.strip()!r}: a declared change reads STRUCT[.FIELD][:RULE] "
                             f"(a rule of `schema diff`: {', '.join(sorted(RULES))})")
        out.append(Allowance(struct, fname or None, declared))
    return out


def read_allow_file(path: str) -> tuple[list[Allowance], str]:
    """(the declared changes of the file, a line saying where they came from). A missing file
    declares nothing (a repository that never declared a change has none)."""
    file = Path(path)
    if file.is_dir():
        raise UsageError(f"--allow-file {path} is a folder: give a file of declared changes, one STRUCT[.FIELD][:RULE] "
                         "a line")
    if not file.is_file():
        return [], f"declared changes: none ({path} does not exist)"
    allowances = parse_allowances(file.read_text().splitlines(), path)
    return allowances, f"declared changes: {len(allowances)} in {path}"


# -- the golden update for review ---------------------------------------------------------
def write_golden(live: Manifest, baseline: Manifest, out: Path) -> dict[str, Any]:
    """The golden update the live catalogue needs, for review, under out/: its manifest
    (out/<id>.json), its index and refusals (out/<id>/), and only the vector files golden/ does not
    bundle already (out/vectors/; vectors are named by their content, so the others are there
    as they are); which cases differ from the baseline's; and out/golden-diff.txt, the review."""
    from conformance.paths import golden_dir
    from conformance.schema.golden import read_index
    from conformance.schema.golden.store import VECTORS, expected_files, require_wire
    from conformance.schema.manifest import save_manifest

    out.mkdir(parents=True, exist_ok=True)
    manifest_file = out / f"{live.id}.json"
    save_manifest(live, manifest_file)
    bundled, written, kept = golden_dir(), 0, 0
    for relative, content in expected_files(require_wire(live)).items():
        there = bundled / relative
        if relative.startswith(VECTORS + "/") and there.is_file() and there.read_bytes() == content:
            kept += 1
            continue
        (out / relative).parent.mkdir(parents=True, exist_ok=True)
        (out / relative).write_bytes(content)
        written += 1
    new, old = read_index(live.id, out), read_index(baseline.id)
    summary: dict[str, Any] = {"folder": str(out), "manifest": str(manifest_file), "files": written,
                               "bundled_vectors": kept}
    # The review a person reads: only what changed, bytes and decoded values side by side.
    from conformance.schema.golden.diff import golden_diff
    from conformance.schema.golden.diff import render_text as render_golden_diff

    review = golden_diff(baseline, live)
    (out / "golden-diff.txt").write_text(render_golden_diff(review))
    summary.update(review=str(out / "golden-diff.txt"), review_summary=review.summary())
    if new is not None and old is not None:
        def shas(index: dict[str, Any]) -> dict[str, str]:
            return {f"{c['struct']}.{c['variant']}": c["sha256"] for c in index.get("cases", [])}

        a, b = shas(old), shas(new)
        summary.update(changed=sorted(k for k in a.keys() & b.keys() if a[k] != b[k]),
                       added=sorted(b.keys() - a.keys()), removed=sorted(a.keys() - b.keys()))
    return summary


# -- output ----------------------------------------------------------------------------------
_COLUMNS = ("STRUCT", "CHANGE", "MSGPACK", "PICKLE", "RULE", "PROOF")
_WIDEST_CHANGE = 56
_NAMED = 8  # violations named in the verdict line; the table has them all
_NAMED_IN_HEADER = 20  # changes named under the run header's catalogue line


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def render_text(report: Report, origin: str = "") -> str:
    rows = report.rows
    breaking = sum(BREAKING in (r.msgpack, r.pickle) for r in rows)
    lines = [f"schema check {report.against} -> {report.live}{f' ({origin})' if origin else ''}: "
             f"{len(rows)} change(s), {breaking} breaking"]
    if report.identity:
        lines.append(report.identity)
    if rows:
        cells = [[r.struct + (" (declared)" if r.declared else ""), _cut(r.change, _WIDEST_CHANGE), r.msgpack,
                  r.pickle, r.rule, r.proof] for r in rows]
        widths = [max(len(c[i]) for c in [list(_COLUMNS), *cells]) for i in range(len(_COLUMNS))]
        for c in [list(_COLUMNS), *cells]:
            lines.append("  ".join(text.ljust(w) for text, w in zip(c, widths)).rstrip())
        lines += [f"  {r.struct}: {r.evidence}" for r in rows if r.evidence]
    if report.golden:
        g = report.golden
        what = (f" ({len(g['changed'])} vector(s) differ from {report.against}'s, {len(g['added'])} new, "
                f"{len(g['removed'])} gone)" if "changed" in g else "")
        lines.append(f"golden: {g['files']} file(s) written under {g['folder']}{what}: the index, the refusals "
                     f"and the vectors golden/ lacks ({g.get('bundled_vectors', 0)} others are bundled already); "
                     f"review them, then bundle them with the manifest {g['manifest']}")
        if "review" in g:
            lines.append(f"{g['review_summary']} (the review: {g['review']})")
    if report.violations:
        named = ", ".join(f"{r.struct} ({r.rule}{', bytes contradict' if r.proof == CONTRADICT else ''})"
                          for r in report.violations[:_NAMED])
        named += f" and {len(report.violations) - _NAMED} more (the table)" if len(report.violations) > _NAMED else ""
        lines.append(f"policy --fail-on {report.policy}: FAILED, {len(report.violations)} change(s) not allowed: "
                     f"{named}. Declare an intended change with --allow STRUCT[.FIELD][:RULE] "
                     f"(or a line in {DEFAULT_ALLOW_FILE})")
    else:
        lines.append(f"policy --fail-on {report.policy}: ok")
    return "\n".join(lines) + "\n"


def to_dict(report: Report) -> dict[str, Any]:
    return {"live": report.live, "against": report.against, "identity": report.identity,
            "policy": report.policy, "exit": report.exit_code,
            "rows": [asdict(r) for r in report.rows], "violations": [r.struct for r in report.violations],
            "golden": report.golden}


def write_json(report: Report, path: str) -> None:
    Path(path).write_text(json.dumps(to_dict(report), indent=1) + "\n")


# -- the run header and its failures ---------------------------------------------------------
def changed_names(live: Manifest, manifest: Manifest) -> dict[str, list[str]]:
    """Struct, enum or message name -> the rules of the changes from `manifest` to `live` it
    has or carries (a message lists those of the nested structs it carries too)."""
    result = diff(manifest, live, modules=live.implementation == manifest.implementation)
    out: dict[str, set[str]] = {}
    for c in result.changes:
        for name in [c.subject, *result.carried_by.get(c.subject, [])]:
            out.setdefault(name, set()).add(c.rule)
    return {name: sorted(rules) for name, rules in out.items()}


def live_differs_line(live: Manifest, manifest: Manifest, impl: str) -> str:
    """The run header's lines when the implementation's live catalogue is not the manifest the
    run checks it against ('' when they agree): the counts, then each changed struct (field) with
    its rule and verdicts, breaking ones first. Another implementation of the same catalogue
    (the reference) keeps its classes in its own modules: where they live is not compared."""
    result: Diff = diff(manifest, live, modules=live.implementation == manifest.implementation)
    if not result.changes:
        return ""
    breaking = sum(BREAKING in (c.msgpack, c.pickle) for c in result.changes)
    lines = [f"catalogue: the live catalogue of {impl} ({live.id}) differs from {manifest.id}: "
             f"{len(result.changes)} change(s), {breaking} breaking; see them: "
             f"ipc-conformance schema check --impl {impl} --against {manifest.id}"]
    # each changed struct by name, breaking ones first: a run against the live catalogue passes
    # whatever changed, so the header is where a breaking change shows
    ordered = sorted(result.changes, key=lambda c: BREAKING not in (c.msgpack, c.pickle))
    for c in ordered[:_NAMED_IN_HEADER]:
        subject = c.subject + (f".{c.field}" if c.field else "")
        lines.append(f"  {'BREAKING' if BREAKING in (c.msgpack, c.pickle) else 'changed'}: {subject}: {c.rule} "
                     f"(msgpack {c.msgpack}, pickle {c.pickle})")
    if len(ordered) > _NAMED_IN_HEADER:
        lines.append(f"  ... and {len(ordered) - _NAMED_IN_HEADER} more (schema check lists them all)")
    return "\n".join(lines)
