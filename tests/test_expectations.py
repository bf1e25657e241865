"""Expected-failure lists: per-check lines, cause lines, and what a run does with them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from summary_lines import listed_line, summary

from conformance import expectations

ROOT = Path(__file__).resolve().parents[1]

LIST = (
    "# a comment\n"
    "Required.Primitive.str.TopLevel.msgpack | TypeError: Cannot serialize  # str refused\n"
    "Required.Generated.X.RoundTrip.pickle  # no prefix\n"
    "cause: fp8 tensors cannot cross pickle | has no attribute 'dtype' | "
    "Required.Tensor.float8_*.Exact.pickle Required.Generated.*.pickle\n"
    "cause: 0-d ndarray gets shape (1,) | re:at \\$\\.\\w+\\[\\d+\\]: "
    "ndarray shape \\(1,\\) != \\(\\)|\\(\\) != \\(1,\\) | "
    "Required.RoundTrip.B.Identical.msgpack.edge\n"
    "cause: reducer #4 text | wrote '#' here | Required.X.*\n"
)


def test_parse_both_line_kinds():
    parsed = expectations.parse(LIST)
    assert set(parsed.checks) == {"Required.Primitive.str.TopLevel.msgpack", "Required.Generated.X.RoundTrip.pickle"}
    assert parsed.checks["Required.Primitive.str.TopLevel.msgpack"].prefix == "TypeError: Cannot serialize"
    fp8, zero_d, hashed = parsed.causes
    assert fp8.globs == ("Required.Tensor.float8_*.Exact.pickle", "Required.Generated.*.pickle")
    assert zero_d.message.startswith("re:") and "|" in zero_d.message  # a '|' in a regex stays in it
    assert hashed.cause == "reducer #4 text" and hashed.message == "wrote '#' here"  # '#' is no comment there


def test_a_cause_explains_matching_checks_by_the_first_line_only():
    parsed = expectations.parse(LIST)
    fp8 = parsed.get("Required.Tensor.float8_e5m2.Exact.pickle")
    assert fp8.explains("AttributeError: type object 'UntypedStorage' has no attribute 'dtype'") == (
        "fp8 tensors cannot cross pickle")
    assert fp8.explains("AssertionError: tensor values differ\n  has no attribute 'dtype'") is None
    assert parsed.get("Required.Tensor.float8_e5m2.Exact.msgpack") is None  # no glob covers it
    generated = parsed.get("Required.Generated.X.RoundTrip.pickle")  # its own line and the fp8 cause
    assert generated.own is not None and generated.causes == (parsed.causes[0],)
    assert generated.explains("anything") == "no prefix"  # its own line first, with its reason
    zero_d = parsed.get("Required.RoundTrip.B.Identical.msgpack.edge")
    assert zero_d.explains("AssertionError: B (edge) changed crossing msgpack at $.arrays[0]: ndarray shape (1,) != ()")
    assert zero_d.explains("AssertionError: B (edge) changed crossing msgpack at $.rid: expected 'a', got 'b'") is None


@pytest.mark.parametrize("line", ["cause: only a cause", "cause: c | msg |", "cause:  | msg | Required.*",
                                  "cause: c | re:([ | Required.*"])
def test_malformed_cause_lines_are_refused_with_their_line(line):
    with pytest.raises(expectations.ExpectationsError, match=r"list.txt:2: "):
        expectations.parse("# header\n" + line, "list.txt")


def test_fix_expectations_keeps_causes_and_lists_what_they_do_not_explain(tmp_path):
    path = tmp_path / "list.txt"
    previous = expectations.parse(LIST)
    expectations.write(path, {"Required.Tensor.float8_e5m2.Exact.pickle": "AttributeError: x has no attribute 'dtype'",
                              "Required.RoundTrip.C.Identical.pickle.edge": "AssertionError: C changed"}, previous, "h")
    text = path.read_text()
    assert all(c.text in text for c in previous.causes)
    assert "float8_e5m2" not in text.replace(previous.causes[0].text, "")  # explained by its cause
    assert "Required.RoundTrip.C.Identical.pickle.edge | AssertionError: C changed  # TODO reason" in text
    assert expectations.parse(text).causes == previous.causes


def test_fix_expectations_groups_one_defect_into_a_cause_line_with_its_trigger(tmp_path):
    """Failures that share a first line, their subjects aside, are one defect: one cause line that
    names each check (never a glob wider than them) and the trigger they all show, and the list it
    writes explains each of them, and nothing else, on the next run."""
    path = tmp_path / "list.txt"
    failures = {f"Required.RoundTrip.{s}.Identical.msgpack.edge": f"AssertionError: {s} (edge) changed crossing "
                f"msgpack at $.x: expected float nan, got NoneType None (+1 more)\n  step: ..." for s in ("A", "B")}
    failures.update({f"Required.Generated.{s}.RoundTrip.msgpack": f"AssertionError: {s} (generated) changed "
                     "crossing msgpack at $.y: expected float nan, got NoneType None" for s in ("C",)})
    failures["Required.Refuses.Tensor.Dtype[x].Decode"] = "AssertionError: Tensor: accepted input it MUST refuse"
    subjects = {"Required.Refuses.Tensor.Dtype[x].Decode": "Tensor.Dtype[x]",
                **{c: c.split(".")[2] for c in failures if "Refuses" not in c}}
    done = expectations.write(path, failures, expectations.Expectations(), "h", subjects)
    written = expectations.parse(path.read_text())
    assert (done.causes_added, done.checks_added) == (1, 2), path.read_text()
    cause = written.causes[0]
    assert cause.message == "(edge) changed crossing msgpack at $.x: expected float nan, got NoneType None", cause
    assert cause.triggers == ()  # no Generated check in the group: nothing to stop drawing
    for check_id, message in failures.items():  # every failure explained, by its cause or its own line
        listing = written.get(check_id)
        assert listing is not None and listing.explains(message.splitlines()[0]) is not None, check_id
    assert written.get("Required.RoundTrip.D.Identical.msgpack.edge") is None  # exact ids, not a glob
    assert written.get("Required.Refuses.Tensor.Dtypex.Decode") is None  # brackets escaped
    assert written.checks["Required.Generated.C.RoundTrip.msgpack"].prefix == ""  # its draw decides the line
    generated = {f"Required.Generated.{s}.RoundTrip.msgpack": f"AssertionError: {s} (generated) changed crossing "
                 "msgpack at $.y: expected float nan, got float 1.0" for s in ("C", "D")}
    expectations.write(path, generated, expectations.Expectations(), "h", {c: c.split(".")[2] for c in generated})
    assert expectations.parse(path.read_text()).causes[0].triggers == ("float-nan",)


# -- runs: the reference testee whose decoder forgets each struct's last field -------------
DROP_FIELD = "cmd:python -m reference_impl.testee --break drop-field"
SELECT = "AbortReq and Identical"  # fails: {pickle,msgpack}.typical; passes: minimal, edge
FAILING = "Required.RoundTrip.AbortReq.Identical.*.typical"


def _run(tmp_path, listed: str) -> tuple[subprocess.CompletedProcess, dict]:
    (tmp_path / "list.txt").write_text(listed)
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--impl", DROP_FIELD,
                           "--expectations", str(tmp_path / "list.txt"), "--report", str(tmp_path / "r.json"),
                           "--", "-k", SELECT], capture_output=True, text=True, timeout=300)
    return proc, {r["id"]: r for r in json.loads((tmp_path / "r.json").read_text())["results"]}


def test_one_cause_line_lists_a_defect_for_every_check_it_breaks(tmp_path):
    proc, records = _run(tmp_path, f"cause: decoder forgets the last field | at $.weight_versions: | {FAILING}\n")
    assert proc.returncode == 0, proc.stdout[-2000:]
    # listed, and failures all the same: the run passes, the count says 2 failed
    assert proc.stdout.strip().splitlines()[-2:] == [listed_line(2), summary(4, 2, listed=2)]
    assert {r["reason"] for r in records.values() if r["outcome"] == "xfailed"} == {"decoder forgets the last field"}


def test_a_listed_check_failing_otherwise_reports_its_actual_error(tmp_path):
    proc, records = _run(tmp_path, f"cause: rid lost | at $.rid: | {FAILING}\n"
                                   "Required.RoundTrip.AbortReq.Identical.pickle.typical | "
                                   "AssertionError: AbortReq (typical) changed crossing pickle at $.rid\n")
    assert proc.returncode == 1
    assert proc.stdout.strip().splitlines()[-1] == summary(4, 2)
    message = records["Required.RoundTrip.AbortReq.Identical.pickle.typical"]["message"]
    assert message.startswith("AssertionError: AbortReq (typical) changed crossing pickle at $.weight_versions: "), \
        message
    judged, _, replay = message.partition("\n  replay: ")
    assert replay.startswith(f"ipc-conformance run --impl '{DROP_FIELD}'"), message
    assert judged.endswith("as failing with: a message starting 'AssertionError: AbortReq (typical) changed crossing "
                            "pickle at $.rid' or cause 'rid lost' (first line containing 'at $.rid:'))"), message
    assert "changed crossing msgpack at $.weight_versions: expected list" in proc.stdout


def test_a_cause_covering_a_passing_check_fails_the_run(tmp_path):
    proc, records = _run(tmp_path, "cause: decoder forgets the last field | at $.weight_versions: | "
                                   "Required.RoundTrip.AbortReq.Identical.*\n")
    assert proc.returncode == 1
    assert proc.stdout.strip().splitlines()[-2:] == [listed_line(2, passing=4), summary(0, 6, listed=2)]
    assert "is listed in" in records["Required.RoundTrip.AbortReq.Identical.msgpack.edge"]["message"]
    assert "but passed: narrow the globs of cause 'decoder forgets the last field'" in proc.stdout


def test_sglang_cause_lines_explain_a_model_of_its_defects(tmp_path):
    """tests/sglang_like_adapter.py models SGLang's pickle reducer, 0-d ndarray and fp8
    defects: every check the list's value-changing causes cover fails, and with exactly the
    message its cause expects (a cause that expected another first line would fail the run)."""
    from pathlib import Path

    here = Path(__file__).resolve().parent
    report = tmp_path / "r.json"
    env = {**__import__("os").environ, "PYTHONPATH": str(here)}
    select = ("(BatchStrOutput or BatchTokenIDOutput) and (Identical or SameValue or Generated) "
              "or float8 and (Exact.pickle or SameOnBoth)")
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "run", "--impl", "sglang_like_adapter:SGLangLike",
         "--expectations", str(expectations.HERE / "sglang-0.5.23.txt"), "--hypothesis-profile", "ci",
         "--report", str(report), "--", "-k", select], capture_output=True, text=True, env=env, timeout=600)
    records = json.loads(report.read_text())["results"]
    failed = [(r["id"], r["message"][:300]) for r in records if r["outcome"] == "failed"]
    assert proc.returncode == 0 and not failed, failed or proc.stdout[-3000:]
    xfailed = {r["id"] for r in records if r["outcome"] == "xfailed"}
    assert {"Required.RoundTrip.BatchStrOutput.Identical.pickle.edge",
            "Required.RoundTrip.BatchStrOutput.Identical.msgpack.edge",
            "Required.CrossTransport.BatchStrOutput.SameValue.edge",
            "Required.Tensor.float8_e5m2.Exact.pickle"} <= xfailed


def test_the_expected_failure_loop_groups_a_defect_and_the_next_run_passes_with_it(tmp_path):
    """`--fix-expectations` on a new list: one cause line for the defect both HttpBase64 checks
    show; the next run with that list passes, counting both as listed failures, and says so."""
    path = tmp_path / "new.txt"
    argv = [sys.executable, "-m", "conformance.cli", "run", "--impl", "defective_adapters:NoBase64",
            "--transport", "msgpack", "--expectations", str(path)]
    select = ["--", "-k", "HttpBase64 and RejectsMalformed"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    fixed = subprocess.run([*argv, "--fix-expectations", *select], capture_output=True, text=True, env=env,
                           cwd=ROOT, timeout=300)
    assert f"expectations: rewrote {path}: 1 cause lines (1 new), 0 check lines (0 new)" in fixed.stdout, \
        fixed.stdout[-2000:]
    causes = expectations.load(path).causes
    assert len(causes) == 1 and "malformed base64 was accepted, not refused" in causes[0].message, causes
    assert set(causes[0].globs) == {"Required.HttpBase64.LoadLoRAAdapterFromTensorsReqInput.RejectsMalformed",
                                    "Required.HttpBase64.UpdateWeightsFromTensorReqInput.RejectsMalformed"}
    again = subprocess.run([*argv, *select], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert again.returncode == 0, again.stdout[-2000:]
    assert again.stdout.strip().splitlines()[-2:] == [listed_line(2), summary(0, 2, listed=2)]


def test_the_closing_lines_name_the_listed_checks_that_did_not_fail():
    from conformance.plugin.summary import closing_lines
    from conformance.records import CheckRecord, Note, Outcome

    records = [CheckRecord("Required.A.S.N", Outcome.FAILED, "listed but passed", note=Note.LISTED_BUT_PASSED),
               CheckRecord("Required.Generated.S.RoundTrip.msgpack", Outcome.PASSED, "", note=Note.NOT_REPRODUCED),
               CheckRecord("Required.B.S.N", Outcome.XFAILED, "boom", reason="known"),
               *(CheckRecord(f"Required.C.S{i}.N", Outcome.PASSED, "", note=Note.NOT_REPRODUCED) for i in range(5))]
    lines = closing_lines(records)
    assert lines[0] == ("listed but not failing this run: 7 (Required.A.S.N, Required.Generated.S.RoundTrip.msgpack, "
                        "Required.C.S0.N, Required.C.S1.N, Required.C.S2.N and 2 more)")
    assert lines[1:] == [listed_line(1, unreproduced=6, passing=1), summary(6, 2, listed=1)]
