"""Schema diff verdicts against real bytes: every bundled manifest pair, every field rule on a
small catalogue, and a diff broken on purpose that the bytes catch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.schema import evolution
from conformance.schema.diff import BREAKING, FULL, RULES, Change, Diff, _version_key, compat
from conformance.schema.diff import diff as real_diff
from conformance.schema.evolution import LOUD, OK, SILENT, verify
from conformance.schema.manifest import (
    Default,
    EnumSpec,
    Field,
    Manifest,
    StructSpec,
    load_manifest,
)

ROOT = Path(__file__).resolve().parents[1]


SILENT_RECORD = ROOT / "spec" / "diffs" / "silent.json"
_REGENERATE = "ipc-conformance schema verify --all --write-silent spec/diffs/silent.json"


def _silent_mismatch(old: str, new: str, result: evolution.Verification) -> str:
    """What differs from the reviewed record of silent exchanges (spec/diffs/silent.json), said
    exactly: a silent exchange is a reader holding another value without an error, the worst
    outcome there is, so each one is recorded and read by a person (spec/diffs/README.md says why
    the known ones happen)."""
    recorded = json.loads(SILENT_RECORD.read_text()).get(f"{old}..{new}")
    if recorded is None:
        return (f"spec/diffs/silent.json has no entry for {old}..{new}: run `{_REGENERATE}` and review the "
                f"silent exchanges it records (git diff)")
    key = lambda r: (r["subject"], r["direction"], r["transport"])
    found = {key(r): r for r in evolution.silent_record(result)}
    expected = {key(r): r for r in recorded}
    lines = [f"new silent exchange {k} between {old} and {new}: {found[k]['evidence']}"
             for k in sorted(set(found) - set(expected))]
    lines += [f"recorded silent exchange {k} between {old} and {new} is not silent any more"
              for k in sorted(set(expected) - set(found))]
    if lines:
        lines.append(f"if the bytes are right, record them: `{_REGENERATE}`, review the diff of "
                     f"spec/diffs/silent.json and say why in spec/diffs/README.md")
    return "\n".join(lines)


def _version(manifest_id: str) -> tuple:
    return _version_key(load_manifest(manifest_id).version)


def _pairs(transitive: bool) -> list[tuple[str, str]]:
    default = evolution.bundled_pairs(transitive=False)
    if not transitive:
        return default
    return [p for p in evolution.bundled_pairs(transitive=True) if p not in default]


def test_bundled_pairs_are_consecutive_plus_first_to_last():
    releases = sorted({m for pair in evolution.bundled_pairs() for m in pair}, key=_version)
    assert len(releases) >= 2 and "sglang-0.5.23" in releases
    consecutive = list(zip(releases, releases[1:]))
    assert evolution.bundled_pairs(transitive=False) == consecutive + (
        [(releases[0], releases[-1])] if len(releases) > 2 else [])
    assert len(evolution.bundled_pairs()) == len(releases) * (len(releases) - 1) // 2
    # the record of silent exchanges names every pair and only pairs of bundled releases
    assert set(json.loads(SILENT_RECORD.read_text())) == {f"{a}..{b}" for a, b in evolution.bundled_pairs()}, (
        f"spec/diffs/silent.json is stale: `{_REGENERATE}`")


def _check_pair(old: str, new: str) -> None:
    result = verify(load_manifest(old), load_manifest(new))
    assert not result.contradictions(), evolution.render_text(result)
    mismatch = _silent_mismatch(old, new, result)
    assert not mismatch, mismatch
    # every changed struct and enum in both releases is checked alone, both ways, both transports
    changed = {c.subject for c in real_diff(load_manifest(old), load_manifest(new)).changes}
    both = {n for n in changed if n in load_manifest(old).structs and n in load_manifest(new).structs} | {
        n for n in changed if n in load_manifest(old).enums and n in load_manifest(new).enums}
    assert {e.message for e in result.changes} == both and len(result.changes) == 4 * len(both)
    # both directions and both transports of every message either version can send
    assert {(e.direction, e.transport) for e in result.exchanges} == {
        (d, t) for d in evolution.DIRECTIONS for t in evolution.TRANSPORTS}


@pytest.mark.parametrize("old, new", _pairs(False), ids=[f"{a}->{b}" for a, b in _pairs(False)])
def test_bundled_pair_bytes_agree_with_the_diff(old, new):
    _check_pair(old, new)


# Every other pair (n(n-1)/2 - n of them; about 3 s each): `pytest -m slow tests/test_evolution.py`,
# or `ipc-conformance schema verify --all`.
@pytest.mark.slow
@pytest.mark.parametrize("old, new", _pairs(True), ids=[f"{a}->{b}" for a, b in _pairs(True)])
def test_transitive_bundled_pair_bytes_agree_with_the_diff(old, new, request):
    if "slow" not in (request.config.option.markexpr or ""):
        pytest.skip("the transitive pairs run with -m slow (consecutive ones and first->last run always)")
    _check_pair(old, new)


def test_field_inserted_in_0_5_22_fails_with_the_field_and_value_named():
    result = verify(load_manifest("sglang-0.5.21"), load_manifest("sglang-0.5.22"))
    by_key = {(e.message, e.direction, e.transport): e for e in result.exchanges}
    backward = by_key["TokenizedGenerateReqInput", "backward", "msgpack"]
    assert backward.outcome == LOUD and backward.rules == ["field-inserted"]
    assert ("sampling_params.stop_regex_strs (position 28, where the writer put its stop_str_max_len = 0)"
            in backward.evidence)
    forward = by_key["TokenizedGenerateReqInput", "forward", "msgpack"]
    assert "sampling_params.stop_str_max_len (position 28, where the writer put its stop_regex_strs = null)" \
        in forward.evidence
    # pickle peers: kw_only structs rebuild by keyword, new readers take old pickles
    assert by_key["TokenizedGenerateReqInput", "backward", "pickle"].outcome == OK
    forward_pickle = by_key["TokenizedGenerateReqInput", "forward", "pickle"]
    assert "Unexpected keyword argument 'watermark'" in forward_pickle.evidence
    # the README shows this very decode
    assert backward.evidence.split(": ", 1)[1] in (ROOT / "README.md").read_text()


def test_an_insertion_hidden_behind_another_is_silent_alone():
    result = verify(load_manifest("sglang-0.5.21"), load_manifest("sglang-0.5.22"))
    alone = {(e.message, e.direction, e.transport): e for e in result.changes}
    hidden = alone["TokenizedEmbeddingReqInput", "forward", "msgpack"]
    assert hidden.outcome == SILENT and hidden.rules == ["field-inserted"]
    assert hidden.evidence.startswith("via BatchTokenizedEmbeddingReqInput: edge: BatchTokenizedEmbeddingReqInput"
                                      ".batch[0].time_stats = null where the writer meant {")
    assert hidden.evidence.endswith("(the value is the writer's decision_layout = null)")
    # with the message whole, SamplingParams fails first: loud, and the shift unseen
    whole = {(e.message, e.direction, e.transport): e for e in result.exchanges}
    assert whole["TokenizedEmbeddingReqInput", "forward", "msgpack"].outcome == LOUD


def test_class_moved_breaks_old_pickle_readers_only():
    result = verify(load_manifest("sglang-0.5.22"), load_manifest("sglang-0.5.23"))
    carriers = [e for e in result.exchanges if e.transport == "pickle" and "class-moved" in e.rules]
    assert carriers and all(e.direction == "forward" and e.outcome == LOUD for e in carriers)
    assert any("No module named 'sglang.srt.multimodal.modality'" in e.evidence for e in carriers)
    # alone: the new module exists for the other moved enum, but does not define this one
    alone = {(e.message, e.direction): e for e in result.changes if e.transport == "pickle"}
    assert alone["Modality", "backward"].outcome == OK
    assert "Can't get attribute 'Modality' on <module 'sglang.srt.multimodal.modality'>" in \
        alone["Modality", "forward"].evidence


# -- every field rule on a one-message catalogue -----------------------------------------
REQ, NONE = Default("required"), Default("value", value=None)


def _f(name: str, type_: str = "int", default: Default = REQ) -> Field:
    return Field(name=name, type=type_, default=default)


def _manifest(version: str, *fields: Field) -> Manifest:
    spec = StructSpec(name="M", module="m", fields=list(fields), tag="M",
                      options={"array_like": True, "kw_only": True}, role="message")
    # a version per case: generated catalogues are cached by manifest id
    return Manifest(implementation="evo", version=version, module="m", structs={"M": spec}, union=["M", "int"])


A = [_f("rid", "Optional[str]", NONE), _f("x")]
ZERO = Default("value", value=0)
FIELD_CASES = {
    # rule: (new fields, {(direction, transport): outcome} that differ from ok)
    "field-appended-with-default": (A + [_f("y", "int", ZERO)], {("forward", "pickle"): LOUD}),
    "field-appended-without-default": (A + [_f("y")], {("backward", "msgpack"): LOUD, ("backward", "pickle"): LOUD,
                                                       ("forward", "pickle"): LOUD}),
    "field-inserted": ([A[0], _f("y", "int", ZERO), A[1]], {("backward", "msgpack"): LOUD,
                                                            ("forward", "msgpack"): SILENT,
                                                            ("forward", "pickle"): LOUD}),
    "field-renamed": ([A[0], _f("z")], {("backward", "pickle"): LOUD, ("forward", "pickle"): LOUD}),
    "type-widened": ([A[0], _f("x", "Optional[int]")], {("forward", "msgpack"): LOUD, ("forward", "pickle"): SILENT}),
    "type-narrowed": ([A[0], _f("x", "Literal[1, 2]")], {("backward", "msgpack"): LOUD,
                                                         ("backward", "pickle"): SILENT}),
    "type-changed": ([A[0], _f("x", "str")], {("backward", "msgpack"): LOUD, ("backward", "pickle"): SILENT,
                                              ("forward", "msgpack"): LOUD, ("forward", "pickle"): SILENT}),
    "default-added": ([A[0], _f("x", "int", Default("value", value=3))], {}),
    "field-removed-last": ([A[0]], {("backward", "pickle"): LOUD, ("forward", "msgpack"): LOUD,
                                    ("forward", "pickle"): LOUD}),
    "field-removed": ([A[1]], {("backward", "msgpack"): LOUD, ("backward", "pickle"): LOUD,
                               ("forward", "msgpack"): LOUD}),
}


@pytest.mark.parametrize("rule", FIELD_CASES)
def test_every_field_rule_agrees_with_the_bytes(rule):
    fields, failing = FIELD_CASES[rule]
    result = verify(_manifest(f"{rule}-old", *A), _manifest(f"{rule}-new", *fields))
    assert not result.contradictions(), evolution.render_text(result)
    assert {(e.direction, e.transport): e.outcome for e in result.exchanges if e.outcome != OK} == failing
    assert all(e.rules == [rule] for e in result.exchanges if e.outcome != OK)


def test_swapped_fields_of_one_type_are_silent_and_named():
    old = _manifest("swap-old", _f("a", "str"), _f("b", "str"))
    new = _manifest("swap-new", _f("b", "str"), _f("a", "str"))
    result = verify(old, new)
    assert not result.contradictions()
    silent = {(e.direction, e.transport): e.evidence for e in result.exchanges if e.outcome == SILENT}
    assert set(silent) == {("backward", "msgpack"), ("forward", "msgpack")}
    assert silent["backward", "msgpack"] == (
        'typical: M.b = "a-0" where the writer meant "b-1" (the value is the writer\'s a = "a-0")')


# -- the check fails when the diff is wrong ----------------------------------------------
def _relabelled(level: str):
    def wrong_diff(old: Manifest, new: Manifest) -> Diff:
        result = real_diff(old, new)
        result.changes = [Change(c.rule, c.subject, c.detail, level, level, c.field) for c in result.changes]
        return result
    return wrong_diff


def test_a_diff_that_calls_a_break_full_is_contradicted(monkeypatch):
    monkeypatch.setattr(evolution, "diff", _relabelled(FULL))
    result = verify(load_manifest("sglang-0.5.21"), load_manifest("sglang-0.5.22"))
    bad = result.contradictions()
    assert {e.message for e in bad} >= {"TokenizedGenerateReqInput", "TokenizedEmbeddingReqInput"}
    assert all(e.contradiction.startswith("the diff says FULL but the bytes fail ") for e in bad)
    assert any("fail silent" in e.contradiction for e in bad if e in result.changes)


def test_a_diff_that_calls_a_harmless_change_breaking_is_contradicted(monkeypatch):
    monkeypatch.setattr(evolution, "diff", _relabelled(BREAKING))
    result = verify(_manifest("harmless-old", *A), _manifest("harmless-new", *A, _f("y", "int", ZERO)))
    # per message and, the message being the one changed struct, per change alone
    assert [(e.direction, e.transport) for e in result.contradictions()] == 2 * [
        ("backward", "msgpack"), ("backward", "pickle"), ("forward", "msgpack")]


def test_cli_verify(capsys):
    assert main(["schema", "verify", "sglang-0.5.21", "sglang-0.5.22"]) == 0
    out = capsys.readouterr().out
    assert "per message: 396 exchanges, 384 ok, 12 loud, 0 silent; 0 contradict the diff" in out
    assert "silently wrong: PositionalEmbeds forward pickle, TokenizedEmbeddingReqInput forward msgpack" in out
    assert "TokenizedGenerateReqInput backward msgpack: loud  [field-inserted]" in out
    assert main(["schema", "verify"]) == 2
    assert main(["schema", "verify", "sglang-0.5.22", "sglang-0.5.23", "--format", "json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    freeze = [e for e in record["messages"] if e["message"] == "FreezeGCReq" and e["outcome"] != "ok"]
    assert freeze == [{"message": "FreezeGCReq", "direction": "forward", "transport": "pickle", "outcome": "loud",
                       "evidence": "minimal: TypeError: Unexpected keyword argument 'gc_threshold'",
                       "expected": "BACKWARD", "rules": ["field-appended-with-default"], "allowed": False,
                       "contradiction": None}]


# -- an implementation against a peer on another release (run --peer) ---------------------
def _peer_outcomes(adapter, peer: str) -> dict[tuple[str, str, str], evolution.Exchange]:
    pc = evolution.PeerCheck(adapter, load_manifest("sglang-0.5.23"), load_manifest(peer))
    return {(m, d, t): pc.exchange(m, d, t) for m in pc.messages() for d in evolution.PEER_DIRECTIONS
            if not pc.sender(m, d) for t in evolution.TRANSPORTS}


def test_the_reference_against_its_own_release_exchanges_everything():
    from reference_tools.adapter import ReferenceAdapter

    assert {e.outcome for e in _peer_outcomes(ReferenceAdapter(), "sglang-0.5.23").values()} == {OK}


def test_the_reference_against_an_older_peer_fails_where_the_diff_says():
    from reference_tools.adapter import ReferenceAdapter

    got = _peer_outcomes(ReferenceAdapter(), "sglang-0.5.22")
    failing = {k: e for k, e in got.items() if e.outcome != OK}
    assert all(not e.allowed and e.outcome == LOUD for e in failing.values())
    assert all(e.outcome == OK for e in got.values() if e.allowed)
    # the same outcomes as the releases' own structs (schema verify 0.5.22 -> 0.5.23)
    releases = verify(load_manifest("sglang-0.5.22"), load_manifest("sglang-0.5.23"))
    assert sorted((e.message, e.direction) for e in releases.exchanges if e.outcome != OK) == sorted(
        (m, "forward" if d == "to-peer" else "backward") for m, d, _ in failing)
    assert "Unexpected keyword argument 'gc_threshold'" in failing["FreezeGCReq", "to-peer", "pickle"].evidence
    assert "Invalid value 'GetHiCacheL3LayoutReq'" in failing["GetHiCacheL3LayoutReq", "to-peer", "msgpack"].evidence


def test_an_implementation_that_loses_a_field_fails_an_exchange_the_diff_allows():
    import msgspec

    from reference_tools.adapter import ReferenceAdapter

    class ForgetsRid(ReferenceAdapter):
        def decode(self, data, transport):
            value = super().decode(data, transport)
            if type(value).__name__ == "AbortReq":
                value = msgspec.structs.replace(value, rid="lost")
            return value

    got = _peer_outcomes(ForgetsRid(), "sglang-0.5.22")
    bad = got["AbortReq", "from-peer", "msgpack"]
    assert bad.allowed and bad.outcome == SILENT and 'AbortReq.rid = "lost"' in bad.evidence
    assert got["AbortReq", "to-peer", "msgpack"].outcome == OK


def test_run_with_peer(tmp_path):
    import subprocess
    import sys

    report = tmp_path / "results.json"
    cmd = [sys.executable, "-m", "conformance.cli", "run", "--peer", "sglang-0.5.22", "--report", str(report),
           "--", "-k", "Peer and FreezeGCReq"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = {r["id"]: r for r in json.loads(report.read_text())["results"]}
    assert set(results) == {f"Recommended.Peer.FreezeGCReq.Exchanges.{d}-sglang-0.5.22.{t}"
                            for d in ("to", "from") for t in ("msgpack", "pickle")}
    loud = results["Recommended.Peer.FreezeGCReq.Exchanges.to-sglang-0.5.22.pickle"]
    assert loud["outcome"] == "recommended-failed"
    assert "loud: FreezeGCReq to-sglang-0.5.22 over pickle [field-appended-with-default; schema diff BACKWARD]" \
        in loud["message"]
    assert [r["outcome"] for i, r in results.items() if i != loud["id"]] == ["passed"] * 3
    strict = subprocess.run(cmd[:4] + ["--strict"] + cmd[4:], cwd=tmp_path, capture_output=True, text=True,
                            timeout=600)
    assert strict.returncode == 1


# -- every named rule of schema diff, planted once and checked against the bytes ----------
def _s(name: str, *fields: Field, module: str = "m", tag: object = "", role: str = "message", base=None,
       **options: bool) -> StructSpec:
    opts = {"array_like": True, "kw_only": True, **options}
    tagged = role == "message" or opts["array_like"]
    return StructSpec(name=name, module=module, fields=list(fields), tag=(name if tag == "" else tag) if tagged
                      else None, options=opts, role=role, base=base)


def _cat(version: str, *structs: StructSpec, enums: tuple = (), prims: tuple = ("int",)) -> Manifest:
    return Manifest(implementation="rule", version=version, module="m", structs={s.name: s for s in structs},
                    enums={e.name: e for e in enums},
                    union=[s.name for s in structs if s.role == "message"] + list(prims))


def _enum(**members: object) -> EnumSpec:
    return EnumSpec(name="E", module="m", members=members)


_M = _s("M", *A)
_N = _s("N", _f("a"), role="nested")
_WITH_N = _s("M", *A, _f("n", "Optional[N]", NONE))
_E = _enum(A=1, B=2)
_MAP = dict(array_like=False)
# case: (rule, old catalogue, new catalogue); a version per side: catalogues are cached by id
_PLANTED: dict[str, tuple[str, tuple, tuple]] = {
    "struct-added": ("struct-added", (_M,), (_WITH_N, _N)),
    "struct-removed": ("struct-removed", (_WITH_N, _N), (_M,)),
    "message-added": ("message-added", (_M,), (_M, _s("Q", _f("a")))),
    "message-removed": ("message-removed", (_M, _s("Q", _f("a"))), (_M,)),
    "message-renamed": ("message-renamed", (_M, _s("Q", _f("q"))), (_M, _s("QRenamed", _f("q")))),
    "primitive-added": ("primitive-added", (_M,), (_M, "str")),
    "primitive-removed": ("primitive-removed", (_M, "str"), (_M,)),
    "tag-changed": ("tag-changed", (_M,), (_s("M", *A, tag="M2"),)),
    "encoding-changed": ("encoding-changed", (_M,), (_s("M", *A, array_like=False),)),
    "option-changed:kw_only": ("option-changed", (_s("M", A[1], A[0]),), (_s("M", A[1], A[0], kw_only=False),)),
    "option-changed:forbid_unknown_fields": ("option-changed", (_M,), (_s("M", *A, forbid_unknown_fields=True),)),
    "option-changed:omit_defaults": ("option-changed", (_M,), (_s("M", *A, omit_defaults=True),)),
    "option-changed:frozen": ("option-changed", (_M,), (_s("M", *A, frozen=True),)),
    "base-changed": ("base-changed", (_M, _s("B", role="base")), (_s("M", *A, base="B"), _s("B", role="base"))),
    "class-moved": ("class-moved", (_M, _N), (_s("M", *A, module="n"), _N)),
    "class-moved:module-gone": ("class-moved", (_s("M", *A, module="x"),), (_s("M", *A, module="n"),)),
    "field-appended-with-default": ("field-appended-with-default", (_M,), (_s("M", *A, _f("y", "int", ZERO)),)),
    "field-appended-without-default": ("field-appended-without-default", (_M,), (_s("M", *A, _f("y")),)),
    "field-inserted": ("field-inserted", (_M,), (_s("M", A[0], _f("y", "int", ZERO), A[1]),)),
    "field-added-with-default": ("field-added-with-default", (_s("M", *A, **_MAP),),
                                 (_s("M", *A, _f("y", "int", ZERO), **_MAP),)),
    "field-added-without-default": ("field-added-without-default", (_s("M", *A, **_MAP),),
                                    (_s("M", *A, _f("y"), **_MAP),)),
    "field-removed-last": ("field-removed-last", (_M,), (_s("M", A[0]),)),
    "field-removed": ("field-removed", (_M,), (_s("M", A[1]),)),
    "fields-reordered": ("fields-reordered", (_s("M", _f("a", "str"), _f("b")),), (_s("M", _f("b"), _f("a", "str")),)),
    "field-renamed": ("field-renamed", (_M,), (_s("M", A[0], _f("z")),)),
    "field-renamed:wire-name": ("field-renamed", (_s("M", *A, **_MAP),),
                                (_s("M", A[0], Field(name="x", type="int", encode_name="ex"), **_MAP),)),
    "type-respelled": ("type-respelled", (_s("M", A[0], _f("x", "List[int]")),),
                       (_s("M", A[0], _f("x", "Tuple[int, ...]")),)),
    "type-widened": ("type-widened", (_M,), (_s("M", A[0], _f("x", "Optional[int]")),)),
    "int-to-float": ("int-to-float", (_s("M", A[0], _f("x", "List[int]")),), (_s("M", A[0], _f("x", "List[float]")),)),
    "float-to-int": ("float-to-int", (_s("M", A[0], _f("x", "float")),), (_M,)),
    "type-narrowed": ("type-narrowed", (_M,), (_s("M", A[0], _f("x", "Literal[1, 2]")),)),
    "type-changed": ("type-changed", (_M,), (_s("M", A[0], _f("x", "str")),)),
    "type-changed:any-to-struct": ("type-changed", (_s("M", A[0], _f("x", "Any")),), (_s("M", A[0], _f("x", "N")), _N)),
    "ext-code-changed": ("ext-code-changed", (_s("M", A[0], _f("t", "Optional[Tensor]", NONE)),),
                         (_s("M", A[0], _f("t", "Optional[NDArray]", NONE)),)),
    "default-added": ("default-added", (_M,), (_s("M", A[0], _f("x", "int", Default("value", value=3))),)),
    "default-removed": ("default-removed", (_s("M", A[0], _f("x", "int", ZERO)),), (_M,)),
    "default-changed": ("default-changed", (_s("M", A[0], _f("x", "int", ZERO)),),
                        (_s("M", A[0], _f("x", "int", Default("value", value=3))),)),
    "default-changed:omit_defaults": ("default-changed", (_s("M", A[0], _f("x", "int", ZERO), omit_defaults=True,
                                                             **_MAP),),
                                      (_s("M", A[0], _f("x", "int", Default("value", value=3)), omit_defaults=True,
                                          **_MAP),)),
    # the old last field gone, another in its place: each change alone looks harmless
    "fields-shifted": ("fields-shifted", (_s("M", A[0], _f("x", "int", ZERO)),),
                       (_s("M", A[0], _f("y", "str", Default("value", value=""))),)),
    "enum-added": ("enum-added", (_M,), (_s("M", *A, _f("e", "Optional[E]", NONE)), _E)),
    "enum-removed": ("enum-removed", (_s("M", *A, _f("e", "Optional[E]", NONE)), _E), (_M,)),
    "enum-member-added": ("enum-member-added", (_s("M", *A, _f("e", "E")), _E),
                          (_s("M", *A, _f("e", "E")), _enum(A=1, B=2, C=3))),
    "enum-member-removed": ("enum-member-removed", (_s("M", *A, _f("e", "E")), _E),
                            (_s("M", *A, _f("e", "E")), _enum(A=1))),
    "enum-member-renamed": ("enum-member-renamed", (_s("M", *A, _f("e", "E")), _E),
                            (_s("M", *A, _f("e", "E")), _enum(A=1, BB=2))),
    "enum-member-value-changed": ("enum-member-value-changed", (_s("M", *A, _f("e", "E")), _E),
                                  (_s("M", *A, _f("e", "E")), _enum(A=1, B=5))),
}
# rules whose subject no message exchange reaches: schema verify decodes messages only
_NOT_ON_THE_WIRE = {"primitive-added": "verify exchanges messages, not top-level primitives",
                    "primitive-removed": "verify exchanges messages, not top-level primitives"}


# rules that forbid a direction no writer can take: the new version has no such message to send. A
# removed message is BREAKING all the same: the peer that still sends it is refused (backward fails)
_NO_SENDER = {"message-removed": "forward"}


def _side(case: str, which: str, parts: tuple) -> Manifest:
    structs = [p for p in parts if isinstance(p, StructSpec)]
    enums = tuple(p for p in parts if isinstance(p, EnumSpec))
    prims = ("int",) + tuple(p for p in parts if isinstance(p, str))
    return _cat(f"{case.replace(':', '-')}-{which}", *structs, enums=enums, prims=prims)


def test_every_rule_of_schema_diff_has_a_planted_case():
    assert {rule for rule, _, _ in _PLANTED.values()} == set(RULES), (
        "a rule of conformance/schema/diff.py RULES has no row in _PLANTED (tests/test_evolution.py): "
        f"add one for {sorted(set(RULES) - {r for r, _, _ in _PLANTED.values()})}")


@pytest.mark.parametrize("case", _PLANTED)
def test_every_rule_of_schema_diff_agrees_with_the_bytes(case):
    rule, old_parts, new_parts = _PLANTED[case]
    old, new = _side(case, "old", old_parts), _side(case, "new", new_parts)
    planted = [c for c in real_diff(old, new).changes if c.rule == rule]
    assert planted, f"{case}: the planted change is not reported as {rule}"
    result = verify(old, new)
    assert not result.contradictions(), evolution.render_text(result)
    if rule in _NOT_ON_THE_WIRE:
        assert all(rule not in e.rules for e in result.exchanges)
        return
    # each direction the rule forbids fails on the bytes of some message, with the rule named
    for c in planted:
        for transport in evolution.TRANSPORTS:
            for direction in evolution.DIRECTIONS:
                if _NO_SENDER.get(rule) == direction:
                    assert not any(e.message == c.subject and (e.direction, e.transport) == (direction, transport)
                                   for e in result.exchanges), f"{case}: {direction} {transport} has a sender"
                    continue
                if compat(direction.upper()) not in compat(getattr(c, transport)):
                    assert any(rule in e.rules and e.outcome != OK for e in result.exchanges
                               if (e.direction, e.transport) == (direction, transport)), (
                        f"{case}: {direction} {transport}\n{evolution.render_text(result, every=True)}")
