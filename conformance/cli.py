"""ipc-conformance: the command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Optional, Sequence

from conformance.errors import USAGE_EXIT, UsageError

if TYPE_CHECKING:
    from conformance.schema.manifest import Manifest


def _version() -> str:
    from conformance import __version__

    return f"ipc-conformance {__version__}"


def _looks_like_path(target: str) -> bool:
    return target.endswith((".py", ".whl")) or "/" in target or Path(target).exists()


def _manifest_extract(args: argparse.Namespace) -> int:
    from conformance.schema.manifest import save_manifest
    from conformance.schema.manifest.extract import UnsupportedTypeError, extract

    source = args.source or (args.module if args.module and _looks_like_path(args.module) else None)
    if source is not None:
        from conformance.schema.manifest.source import extract_source

        if args.source and args.module:
            raise UsageError(f"give --source {args.source} or a module name, not both ({args.module!r})")
        if args.imports or args.root:
            raise UsageError("--import and --root are import-mode options; --source reads every module of the "
                             "tree and finds the tagged roots itself")
        from conformance.progress import Progress

        with Progress("manifest extract") as progress:
            progress.show(f"reading {source} (statically)")
            manifest = extract_source(source, module=args.source_module, implementation=args.implementation,
                                      version=args.version, array_typecode=args.array_typecode,
                                      union_attr=args.union_attr, exclude=args.exclude)
    else:
        if not args.module:
            raise UsageError("give a module name (sglang.srt.managers.io_struct) or --source PATH")
        try:
            manifest = extract(
                args.module,
                roots=args.root,
                imports=args.imports,
                union_attr=args.union_attr,
                implementation=args.implementation,
                version=args.version,
                array_typecode=args.array_typecode,
                exclude=args.exclude,
            )
        except UnsupportedTypeError as exc:
            raise UsageError(str(exc)) from None
        except ImportError as exc:
            raise UsageError(f"cannot import {args.module!r} (or a module it imports): {exc}; "
                             f"--source PATH reads the code without importing it") from None
    if args.version is None:  # an edited tree is not the release it says it is
        from conformance.schema.manifest.identity import own_identity

        manifest = own_identity(manifest)
    if args.out:
        save_manifest(manifest, args.out)  # a folder that is not there: main() says so in one line
        print(f"wrote {args.out}: {len(manifest.structs)} structs, {len(manifest.messages)} messages, "
              f"{len(manifest.enums)} enums", file=sys.stderr)
    else:
        sys.stdout.buffer.write(manifest.to_json())
    return 0


def _codegen(args: argparse.Namespace) -> int:
    from conformance.schema.codegen import generate
    from conformance.schema.manifest import load_manifest

    source = generate(load_manifest(args.manifest))
    if args.check:
        current = Path(args.out).read_text() if args.out and Path(args.out).exists() else ""
        if current != source:
            print(f"{args.out} is stale: run `ipc-conformance codegen {args.manifest} --out {args.out}`",
                  file=sys.stderr)
            return 1
        return 0
    if args.out:
        Path(args.out).write_text(source)
    else:
        sys.stdout.write(source)
    return 0


def _run(args: argparse.Namespace) -> int:
    from conformance.plugin.options import OPTIONS
    from conformance.runner import run

    chosen = {o.dest: getattr(args, o.dest) for o in OPTIONS if o.cli}
    return run(**chosen, pytest_args=args.pytest_args, workers=args.workers)


def _diff_side(spec: str, *, imports: Sequence[str] = (), union_attr: Optional[str] = None) -> Manifest:
    """A manifest file, a bundled id, an implementation name (the live catalogue of its
    adapter: reference, sglang, ...), or `live:<module>` (extracted now)."""
    from conformance.schema.manifest import load_manifest
    from conformance.schema.manifest.extract import extract
    from conformance.schema.manifest.identity import own_identity

    # By its own id: an edited catalogue that kept a release's id is not that release (its golden
    # vectors, its generated classes).
    if spec.startswith("live:"):
        try:
            return own_identity(extract(spec[5:], imports=imports, union_attr=union_attr or "_all_types",
                                        array_typecode="q"))
        except ImportError as exc:
            raise UsageError(f"{spec}: cannot import {spec[5:]!r} (or a module it imports): {exc}") from None
    if spec in ("reference", "sglang"):
        from conformance.adapters import load_adapter

        return own_identity(load_adapter(spec).live_manifest())
    return own_identity(load_manifest(spec))


# -- spec tools: schema diff, golden vectors, testee smoke (spec/SPEC.md, spec/testee.md) --
def _schema_diff(args: argparse.Namespace) -> int:
    import json
    from dataclasses import asdict

    from conformance.schema.diff import older_manifests, render_json, render_text

    side = dict(imports=args.imports, union_attr=args.union_attr)
    new = _diff_side(args.new, **side)
    olds = [_diff_side(args.old, **side)]
    if args.transitive:
        olds += [m for m in older_manifests(new) if m.id not in {o.id for o in olds}]
    from conformance.schema import migration
    from conformance.schema.diff import diff

    if any(migration.is_dataclass_catalogue(m) for m in (new, *olds)):
        # a catalogue from before the msgspec migration: what moving it costs, not wire rules
        for old in olds:
            report = migration.migration(old, new)
            sys.stdout.write(json.dumps(asdict(report), indent=1) + "\n" if args.format == "json"
                             else migration.render_text(report))
        return 0
    results = [diff(old, new, modules=not args.ignore_modules) for old in olds]
    if args.format == "json":
        sys.stdout.write(render_json(results))
    else:
        sys.stdout.write("\n".join(render_text(r) for r in results))
    if not args.check:
        return 0
    failed = 0
    for r in results:
        bad = r.violations(args.check, args.peers)
        verdict = "ok" if not bad else f"FAILED: {len(bad)} change(s) not allowed"
        print(f"check {args.check} for {args.peers} peers, {r.old} -> {r.new}: {verdict}", file=sys.stderr)
        for c in bad:
            print(f"  {c.subject}: {c.line()}", file=sys.stderr)
        failed += bool(bad)
    return 1 if failed else 0


def _schema_verify(args: argparse.Namespace) -> int:
    import json

    from conformance.schema.evolution import bundled_pairs, render_text, to_dict, verify
    from conformance.schema.manifest import load_manifest

    if args.write_silent and not Path(args.write_silent).parent.is_dir():  # before minutes of work
        raise UsageError(f"--write-silent {args.write_silent}: no folder {Path(args.write_silent).parent}")
    if args.all:
        pairs = [(load_manifest(a), load_manifest(b)) for a, b in bundled_pairs(transitive=not args.consecutive)]
    elif args.old and args.new:
        pairs = [(_diff_side(args.old), _diff_side(args.new))]
    else:
        raise UsageError("give OLD and NEW (manifest files or bundled ids), or --all")
    contradicted, records, results = 0, [], []
    for old, new in pairs:
        try:
            result = verify(old, new)
        except ValueError as exc:  # a dataclass catalogue: no msgpack form to verify
            raise UsageError(str(exc)) from None
        results.append(result)
        if args.format == "json":
            records.append(to_dict(result))
        else:
            sys.stdout.write(render_text(result, every=args.every))
        contradicted += len(result.contradictions())
    if args.format == "json":
        sys.stdout.write(json.dumps(records, indent=1) + "\n")
    if args.write_silent:
        from conformance.schema.evolution import write_silent

        write_silent(Path(args.write_silent), results)
        print(f"schema verify: silent exchanges of {len(results)} pair(s) recorded in {args.write_silent}",
              file=sys.stderr)
    if contradicted:
        print(f"schema verify: {contradicted} exchange(s) contradict the schema diff", file=sys.stderr)
    return 1 if contradicted else 0


def _schema_check(args: argparse.Namespace) -> int:
    from conformance.schema import check
    from conformance.schema.manifest import load_manifest

    # Every mistake in the command is found before the catalogue is read (an extraction takes seconds).
    allowances = check.parse_allowances(args.allow)
    declared = ""
    if args.allow_file:
        from_file, declared = check.read_allow_file(args.allow_file)
        allowances += from_file
    given_baseline = load_manifest(args.against) if args.against else None
    implementation = None
    if args.impl:  # the front door asks the adapter; the spec tooling never loads one
        from conformance.adapters import load_adapter

        try:
            implementation = load_adapter(args.impl).live_manifest()
        except NotImplementedError:
            raise UsageError(f"--impl {args.impl!r} describes no catalogue to check; give --source or --manifest") \
                from None
    from conformance.progress import Progress

    with Progress("schema check", total=4 + bool(args.golden_out)) as progress:
        progress.step("reading the live catalogue")
        live = check.live_catalogue(source=args.source, manifest=args.manifest, implementation=implementation,
                                    module=args.module, version=args.tree_version)
        progress.step("choosing the baseline")
        baseline = given_baseline or check.baseline_for(live)
        progress.step(f"diffing against {baseline.id}")
        rows = check.check(live, baseline, modules=not args.ignore_modules)
        progress.step("proving the verdicts with bytes")
        report = check.judge(live, baseline, rows, args.fail_on, allowances)
        report.identity = check.identity_line(live, baseline, args.against)
        if args.golden_out:
            progress.step(f"writing golden vectors to {args.golden_out}")
            report.golden = check.write_golden(live, baseline, Path(args.golden_out))
    origin = next(f"{flag} {value}" for flag, value in (("--source", args.source), ("--impl", args.impl),
                                                         ("--manifest", args.manifest)) if value)
    sys.stdout.write(check.render_text(report, origin))
    if declared:
        print(declared)
    if args.json:
        check.write_json(report, args.json)
    return report.exit_code


def _golden(args: argparse.Namespace) -> int:
    from conformance.paths import golden_dir
    from conformance.schema.golden import check, update
    from conformance.schema.golden.diff import render_text, snapshot, update_review
    from conformance.schema.manifest import wire_manifests

    if args.golden_command == "diff":
        return _golden_diff(args)
    ids = args.manifest or None
    _golden_progress(args.golden_command, ids or wire_manifests())
    if args.golden_command == "update":
        # the writer `pytest --snapshot-update` uses (conformance.schema.golden.writer): only the
        # files that changed, atomically; a corrupted or missing vector stops it (GoldenError)
        # before anything is written, unless --repair
        if not args.repair:
            from conformance.schema.golden.writer import recorded_files

            for mid in ids or wire_manifests():
                recorded_files(golden_dir(), mid)
        before = snapshot(ids or wire_manifests(), golden_dir())
        fixed = update(ids, repair=args.repair)
        for review in update_review(before, golden_dir()):
            sys.stdout.write(render_text(review))
        if not fixed:
            print("golden: up to date")
            return 0
        kinds = {k: sum(p.kind == k for p in fixed) for k in ("missing", "changed", "unused")}
        print(f"golden: {kinds['missing']} file(s) written, {kinds['changed']} rewritten, "
              f"{kinds['unused']} deleted (review the diff)")
        return 0
    problems = check(ids)
    for problem in problems:
        print(problem)
    if not problems:
        print("golden: up to date")
    if problems:
        print(f"golden: {len(problems)} problem(s): run `ipc-conformance golden update` and review the diff",
              file=sys.stderr)
    return 1 if problems else 0


def _golden_progress(command: str, ids: Sequence[str]) -> None:
    """On a terminal, build each manifest's vectors first, one progress step each (the store
    keeps them: check and update then compare and write without building them again)."""
    from conformance.progress import Progress, shown

    if not shown():
        return
    from conformance.schema.golden.store import expected_files, require_wire
    from conformance.schema.manifest import load_manifest

    with Progress(f"golden {command}", total=len(ids)) as progress:
        for manifest_id in ids:
            progress.step(f"{manifest_id}: building its vectors")
            expected_files(require_wire(load_manifest(manifest_id)))
        progress.show("comparing with golden/")


def _golden_diff(args: argparse.Namespace) -> int:
    from conformance.schema.golden.diff import golden_diff, render_text
    from conformance.schema.manifest import load_manifest

    old, new = load_manifest(args.old), load_manifest(args.new)  # UsageError: one line, exit 2
    sys.stdout.write(render_text(golden_diff(old, new), fields=args.fields or None))
    return 0


def _smoke(args: argparse.Namespace) -> int:
    from conformance.testee.smoke import smoke

    return smoke(args.impl, args.manifest)


def _testee_replay(args: argparse.Namespace) -> int:
    from pathlib import Path

    from conformance.testee.replay import replay

    return replay(Path(args.frame), args.impl)


def _coverage(args: argparse.Namespace) -> int:
    from conformance.coverage import measure, measure_edges
    from conformance.every_arm import deterministic_sends
    from conformance.every_edge import edge_sends
    from conformance.progress import Progress
    from conformance.schema.golden.catalogue import catalogue_for
    from conformance.schema.manifest import load_manifest, wire_manifests

    complete = True
    ids = args.manifest or wire_manifests()
    with Progress("coverage", total=len(ids)) as progress:
        for manifest_id in ids:
            progress.step(manifest_id)
            manifest = load_manifest(manifest_id)
            if manifest.is_dataclass_catalogue:
                raise UsageError(f"{manifest.id} is a dataclass catalogue (pickle only): coverage measures the "
                                 f"msgpack checks; give a msgspec release ({', '.join(wire_manifests())})")
            classes = catalogue_for(manifest).classes
            result = measure(manifest, deterministic_sends(manifest, classes, every_arm=not args.canonical_only))
            progress.close()  # the line is erased before the command's own output
            print(result.render(per_message=args.per_message), flush=True)
            complete &= not result.uncovered()
            if not args.canonical_only:  # the EveryEdge instances: (struct, field, position, value class)
                progress.show(f"[{progress.count}/{len(ids)}] {manifest_id}: value classes")
                edges = measure_edges(manifest, edge_sends(manifest, classes))
                progress.close()
                print(edges.render(per_class=args.per_message), flush=True)
                complete &= not edges.uncovered()
    return 0 if complete else 1


def _add_spec_commands(sub: "argparse._SubParsersAction[_Parser]") -> None:
    cov = sub.add_parser("coverage", help="field-arm coverage: does every field of every struct a message can "
                         "carry, at any depth, take each arm of its type in the deterministic checks? and value-class "
                         "coverage: does every position take every edge value of each class in the EveryEdge checks? "
                         "(exit 1 if not)")
    cov.add_argument("--manifest", action="append", default=[], help="only this manifest id; repeatable "
                     "(default: every bundled manifest)")
    cov.add_argument("--per-message", action="store_true", help="also print covered/required per message "
                     "(and per value class)")
    cov.add_argument("--canonical-only", action="store_true",
                     help="count only the canonical variants (without the EveryArm and EveryEdge instances)")
    cov.set_defaults(func=_coverage)

    schema = sub.add_parser("schema", help="manifest schema tools").add_subparsers(dest="schema_command", required=True)
    sd = schema.add_parser("diff", help="every change between two manifests, by rule, classified for msgpack "
                           "(array_like) and pickle peers")
    sd.add_argument("old", help="manifest file, bundled id (sglang-0.5.22), reference, sglang, or live:<module>")
    sd.add_argument("new", help="the same kinds as OLD")
    sd.add_argument("--check", choices=["FULL", "BACKWARD", "FORWARD", "NONE"],
                    help="exit 1 when the change is not allowed under this compatibility mode")
    sd.add_argument("--peers", choices=["msgpack", "pickle", "both"], default="msgpack",
                    help="whose compatibility --check judges (default: msgpack)")
    sd.add_argument("--transitive", action="store_true",
                    help="also diff every older bundled manifest of the same implementation against NEW")
    sd.add_argument("--format", choices=["text", "json"], default="text")
    sd.add_argument("--ignore-modules", action="store_true",
                    help="ignore which Python module a class lives in (e.g. a generated catalogue)")
    sd.add_argument("--import", dest="imports", action="append", default=[],
                    help="for live:<module>: import this module first (registers custom types); repeatable")
    sd.add_argument("--union-attr", default="_all_types", help="for live:<module>: the union attribute")
    sd.set_defaults(func=_schema_diff)
    sv = schema.add_parser("verify", help="check the diff's verdicts against real bytes: decode each version's "
                           "vectors with the other's structs (msgpack and pickle, both directions)")
    sv.add_argument("old", nargs="?", help="manifest file, bundled id, reference, sglang")
    sv.add_argument("new", nargs="?", help="the same kinds as OLD")
    sv.add_argument("--all", action="store_true", help="every pair of bundled msgspec-era manifests of one "
                    "implementation (consecutive and transitive)")
    sv.add_argument("--consecutive", action="store_true", help="with --all: each release with the next, and the "
                    "first with the last (n pairs instead of n(n-1)/2)")
    sv.add_argument("--every", action="store_true", help="print every exchange, not only those that fail")
    sv.add_argument("--write-silent", metavar="FILE", help="record each pair's silent exchanges in FILE (JSON; "
                    "spec/diffs/silent.json is the reviewed record of the bundled releases)")
    sv.add_argument("--format", choices=["text", "json"], default="text",
                    help="json: every exchange with its outcome, evidence, the diff's level and rules")
    sv.set_defaults(func=_schema_verify)

    sc = schema.add_parser("check", help="one command for a schema change: the live catalogue diffed against a "
                           "release, each verdict proven by bytes, a table to review, the golden update, exit by "
                           "policy (0 ok, 1 not allowed, 2 usage)")
    live = sc.add_mutually_exclusive_group(required=True)
    live.add_argument("--source", help="a source file, package folder or checkout: read statically, never imported")
    live.add_argument("--impl", help="an installed implementation's live catalogue (sglang, reference, ...)")
    live.add_argument("--manifest", help="a manifest file (e.g. from `manifest extract`)")
    sc.add_argument("--against", help="the baseline: a bundled id or a manifest file (default: the msgspec-era "
                    "release nearest the live catalogue's version; when that is unknown, the closest in content)")
    sc.add_argument("--module", help="with --source: the catalogue module's dotted name (default "
                    "sglang.srt.managers.io_struct, or the file's own module; a lone io_struct.py is SGLang's)")
    sc.add_argument("--version", dest="tree_version", metavar="VERSION", help="with --source: the tree's version "
                    "(default: its version file, else git: the release tag and the commits since, or the commit)")
    sc.add_argument("--fail-on", choices=["BREAKING", "NOT_FULL", "NEVER"], default="BREAKING",
                    help="which verdicts (msgpack or pickle) fail the check (default: BREAKING); a verdict the "
                    "bytes contradict fails it too, except with NEVER")
    sc.add_argument("--allow", action="append", default=[], metavar="STRUCT[.FIELD][:RULE]",
                    help="a declared change: it does not fail the check; repeatable")
    sc.add_argument("--allow-file", help="declared changes, one STRUCT[.FIELD][:RULE] a line (# comments); a "
                    "missing file declares none")
    sc.add_argument("--golden-out", help="write the golden vectors the live catalogue would have here "
                    "(DIR/<id>/ and DIR/<id>.json), for review")
    sc.add_argument("--json", help="also write the table and the verdict as JSON here")
    sc.add_argument("--ignore-modules", action="store_true", help="count each class as living in the baseline's "
                    "module (another implementation of the catalogue, e.g. a generated one, has its own modules)")
    sc.set_defaults(func=_schema_check)

    golden = sub.add_parser("golden", help="golden vectors").add_subparsers(dest="golden_command", required=True)
    for name, text in (("update", "rewrite golden/ from the manifests (review the diff; CI never runs this)"),
                       ("check", "exit 1 when golden/ differs from what the manifests imply")):
        g = golden.add_parser(name, help=text)
        g.add_argument("--manifest", action="append", default=[], help="only this manifest id; repeatable")
        if name == "update":
            g.add_argument("--repair", action="store_true",
                           help="rewrite vector files that are corrupted or missing (by default the update stops, "
                           "naming the file)")
        g.set_defaults(func=_golden)
    gd = golden.add_parser("diff", help="what changes in the golden vectors from OLD to NEW: bytes and "
                           "decoded values of each changed case, messages added and removed (NEW need not be bundled)")
    gd.add_argument("old", help="manifest file or bundled id (sglang-0.5.22)")
    gd.add_argument("new", help="manifest file or bundled id")
    gd.add_argument("--fields", type=int, default=12, metavar="N",
                    help="changed fields shown per case (default 12; 0: all)")
    gd.set_defaults(func=_golden)

    sm = sub.add_parser("smoke", help="a quick check that an implementation (e.g. a cmd: testee) is wired up")
    sm.add_argument("--impl", default="reference", help='implementation, e.g. "cmd:python -m reference_impl.testee"')
    sm.add_argument("--manifest", help="manifest id (default: the one the implementation claims)")
    sm.set_defaults(func=_smoke)

    testee = sub.add_parser("testee", help="tools for cmd: testees").add_subparsers(dest="testee_command",
                                                                                  required=True)
    rp = testee.add_parser("replay", help="send one saved request (named in a failure message) to a testee "
                                          "and print its answer")
    rp.add_argument("frame", help="the .frame file the failure message names")
    rp.add_argument("--impl", required=True, help='the testee, e.g. "cmd:./my-testee"')
    rp.set_defaults(func=_testee_replay)


def _report_compare(args: argparse.Namespace) -> int:
    from conformance.records import load_results
    from conformance.report import compare

    # load_results: a file that is no results.json is a UsageError naming the file and field.
    sys.stdout.write(compare([load_results(name) for name in args.results]))
    return 0


def _report_site(args: argparse.Namespace) -> int:
    from conformance.site import build_site

    index = build_site([Path(p) for p in args.results], Path(args.out))  # ResultsFileError: one line, exit 2
    print(f"site written: {index}")
    return 0


def _workers(text: str) -> str:
    """-n: a number of workers, or auto (pytest-xdist's words), checked before pytest starts."""
    if text in ("auto", "logical") or (text.isdigit() and int(text) >= 0):
        return text
    raise argparse.ArgumentTypeError(f"not a number of workers: {text!r} (a number, or auto: one per core)")


#: array.array's typecodes (array.typecodes of Python 3.10-3.12)
_ARRAY_TYPECODES = list("bBuhHiIlLqQfd")


class _Parser(argparse.ArgumentParser):
    """argparse's parser, keeping the message of the usage error it exits on (subparsers are of
    the same class), so that `run` can end with it as its last line."""

    refused: str = ""

    def error(self, message: str) -> NoReturn:
        _Parser.refused = message
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ipc-conformance", description=__doc__)
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True)

    manifest = sub.add_parser("manifest", help="wire manifests").add_subparsers(dest="manifest_command", required=True)
    ex = manifest.add_parser("extract", help="build a manifest from an importable module of msgspec structs "
                                             "or dataclasses, or from its source without importing it (--source)")
    ex.add_argument("module", nargs="?", help="e.g. sglang.srt.managers.io_struct; a .py file, a directory or a "
                                              ".whl is read as --source")
    ex.add_argument("--source", metavar="PATH", help="read the catalogue from source, never importing it: an "
                    "io_struct.py file, a package or checkout directory, or a wheel")
    ex.add_argument("--module", dest="source_module", metavar="NAME", help="with --source: the catalogue module's "
                    "dotted name (default: the file given, or sglang.srt.managers.io_struct)")
    ex.add_argument("-o", "--out", help="write here instead of stdout")
    ex.add_argument("--exclude", action="append", default=[], metavar="NAME",
                    help="leave this struct out of the union (it stays if a field reaches it); repeatable")
    ex.add_argument("--import", dest="imports", action="append", default=[],
                    help="also import this module first (it registers custom types); repeatable")
    ex.add_argument("--root", action="append", default=[],
                    help="message base class in MODULE (default: its tagged root structs); repeatable")
    ex.add_argument("--union-attr", default="_all_types",
                    help="module attribute listing the types registered for the top-level union")
    ex.add_argument("--implementation", help="name in the manifest (default: top-level package)")
    ex.add_argument("--version", help="version in the manifest (default: the distribution's; with --source: "
                                      "the wheel's, or __version__ in the tree's version.py)")
    ex.add_argument("--array-typecode", default="q", choices=_ARRAY_TYPECODES, metavar="CODE",
                    help="typecode of array.array fields (default: q, int64, the spec's default)")
    ex.set_defaults(func=_manifest_extract)

    rep = sub.add_parser("report", help="reports of conformance runs").add_subparsers(dest="report_command",
                                                                                       required=True)
    cmp_ = rep.add_parser("compare", help="a Markdown table of check areas x implementations")
    cmp_.add_argument("results", nargs="+", help="results.json files of `run --report-dir` / `run --report`")
    cmp_.set_defaults(func=_report_compare)
    site = rep.add_parser("site", help="a static site comparing runs: implementations x areas, a page per "
                                       "implementation (failures first) and per check; opens from disk")
    site.add_argument("results", nargs="+", help="results.json files (or the --report-dir folders holding them)")
    site.add_argument("--out", required=True, help="folder to write the site into; open its index.html")
    site.set_defaults(func=_report_site)

    cg = sub.add_parser("codegen", help="generate a Python module of structs from a manifest")
    cg.add_argument("manifest", help="manifest file or bundled id (sglang-0.5.23)")
    cg.add_argument("--out", help="write here instead of stdout")
    cg.add_argument("--check", action="store_true", help="exit 1 when --out differs from what would be generated")
    cg.set_defaults(func=_codegen)

    run = sub.add_parser("run", help="run the conformance suite against an implementation")
    from conformance.plugin.options import add_to_argparse

    add_to_argparse(run)  # the same table gives pytest its --ipc-* options
    run.add_argument("-n", "--numprocesses", dest="workers", metavar="N", type=_workers,
                     help="run the checks on N pytest-xdist workers (a number, or auto: one per core); "
                          "the results and reports are those of a serial run")
    run.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    run.set_defaults(func=_run)

    _add_spec_commands(sub)
    _add_installed_commands(sub)
    return parser


#: Entry points that add subcommands (the reference's `serve` and `bench`): each a callable taking
#: the subparsers; the CLI names no implementation in its code.
COMMANDS_GROUP = "ipc_conformance.commands"


def _add_installed_commands(sub: "argparse._SubParsersAction[_Parser]") -> None:
    import importlib.metadata

    for entry in sorted(importlib.metadata.entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        try:
            add = entry.load()
        except ImportError:  # its package is not installed here
            continue
        add(sub)


def _command_words(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """`ipc-conformance schema diff`: the program and the subcommands the user typed."""
    words = [parser.prog, args.command]
    words += [getattr(args, f"{args.command}_command")] if hasattr(args, f"{args.command}_command") else []
    return " ".join(words)


def _named_by_user(exc: OSError, argv: Sequence[str]) -> bool:
    """Whether the file an OSError names is one the user gave (or lies under a folder they gave)."""
    if not exc.filename:
        return False
    failed = Path(str(exc.filename))
    given = {Path(a.split("=", 1)[-1]) for a in argv if (a and not a.startswith("-")) or "=" in a}
    return any(failed == g or g in failed.parents for g in given)


def _run_error_line(args: argparse.Namespace, problem: str) -> None:
    """`run`'s last line on stdout, where a job reads its result, when the run could not start."""
    if args.command == "run":
        from conformance.plugin.summary import error_line

        print(error_line(problem))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        if exit_.code == USAGE_EXIT and argv[:1] == ["run"]:  # a run's last line says it did not run
            from conformance.plugin.summary import error_line

            print(error_line(_Parser.refused or "the arguments were refused (see the message above)"))
        raise
    try:
        code: int = args.func(args)
        return code
    except UsageError as exc:  # the user's mistake: one line, never a traceback
        print(f"{_command_words(parser, args)}: error: {exc}", file=sys.stderr)
        _run_error_line(args, str(exc))
        return USAGE_EXIT
    except OSError as exc:  # a path the user named cannot be read or written (a missing folder, a typo)
        if not _named_by_user(exc, argv):
            raise
        hint = " (give a path whose folder exists)" if isinstance(exc, FileNotFoundError) else ""
        problem = f"{exc.filename}: {(exc.strerror or str(exc)).lower()}{hint}"
        print(f"{_command_words(parser, args)}: error: {problem}", file=sys.stderr)
        _run_error_line(args, problem)
        return USAGE_EXIT


if __name__ == "__main__":
    sys.exit(main())
