"""The typed records and their published JSON Schemas (spec/schemas/): results.json, the testee
protocol's frames, the refusal corpus. Each schema is generated from the struct that reads and
writes the document; the published file must be what the struct generates now."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from conformance import json_schemas as schemas
from conformance.records import (
    CheckRecord,
    Counts,
    Note,
    Outcome,
    Results,
    ResultsFileError,
    counts,
    decode_results,
    encode_results,
    load_results,
)
from conformance.schema.golden import refusals
from conformance.testee import SubprocessAdapter, frames, protocol

ROOT = Path(__file__).resolve().parents[1]


def test_published_schemas_are_up_to_date():
    assert schemas.stale() == [], "run: python -m conformance.json_schemas --write"


def test_a_stale_schema_is_named_and_rewritten(tmp_path):
    assert schemas.write(tmp_path) == list(schemas.SCHEMAS)
    assert schemas.stale(tmp_path) == []
    edited = tmp_path / "results.schema.json"
    edited.write_text(edited.read_text().replace('"recommended-failed"', '"recommended_failed"'))
    assert schemas.stale(tmp_path) == ["results.schema.json"]
    assert schemas.write(tmp_path) == ["results.schema.json"] and schemas.stale(tmp_path) == []


def test_the_schema_says_what_the_struct_says():
    doc = json.loads((ROOT / "spec" / "schemas" / "results.schema.json").read_text())
    assert sorted(doc["$defs"]["Outcome"]["enum"]) == sorted(o.value for o in Outcome)
    assert doc["$defs"]["CheckRecord"]["required"] == ["id", "outcome", "message"]
    testee = json.loads((ROOT / "spec" / "schemas" / "testee.schema.json").read_text())
    assert {"Start", "Started", "Result", "Decode", "Stop", "Stopped"} <= set(testee["$defs"])
    assert sorted(testee["$defs"]["Result"]["properties"]["result"]["enum"]) == sorted(protocol.RESULTS)


# -- one outcome vocabulary, one count ---------------------------------------------------------
def test_each_check_is_counted_once_under_its_own_outcome():
    records = [CheckRecord(f"Required.A.S.N.{o.value}", o, "") for o in Outcome]
    records.append(CheckRecord("Recommended.A.S.N.x", Outcome.RECOMMENDED_FAILED, "m"))
    c = counts(records)
    assert c == Counts(passed=1, failed=1, xfailed=1, recommended_failed=2, skipped=1, required_failed=2,
                       not_tested={"no reason given": 1}) and c.total == len(records)
    assert c[Outcome.RECOMMENDED_FAILED] == c["recommended-failed"] == 2
    # the conformance figures: a listed failure is a failure
    assert (c.failures, c.listed, c.ran) == (2, 1, 5)
    assert c.phrase() == "1 passed, 2 failed (1 listed), 2 recommended failed, 1 not tested"
    assert c.brief() == "1/5 passed, 2 failed (1 listed), 2 recommended failed, 1 not tested"


def test_checks_not_tested_are_counted_by_reason():
    skip = "Skipped: x-1 does not offer 'receive_path.controller' (its receive path (ZeroMQ)), 'e2e' (a server)"
    records = [CheckRecord(f"Required.A.S{i}.N", Outcome.SKIPPED, m) for i, m in enumerate(
        [skip, skip, "Skipped: needs both transports\nmore", "Skipped: x-1 does not offer 'e2e' (a server)"])]
    assert counts(records).not_tested == {"receive_path.controller, e2e not offered": 2,
                                          "e2e not offered": 1, "needs both transports": 1}


def test_results_json_round_trips_through_the_struct():
    results = Results(impl="x-1", manifest="m", transport="both", counts=Counts(passed=1), results=[
        CheckRecord("Required.A.S.N", Outcome.PASSED, ""),
        CheckRecord("Required.A.S.M", Outcome.XFAILED, "boom \ud800", reason="known"),
        CheckRecord("Required.A.S.L", Outcome.FAILED, "listed", note=Note.LISTED_BUT_PASSED)])
    text = encode_results(results)
    data = json.loads(text)
    # The outcome strings are results.json's as ever; an empty reason and no note are left out.
    assert data["results"][0] == {"id": "Required.A.S.N", "outcome": "passed", "message": ""}
    assert data["results"][2]["note"] == "listed-but-passed"
    assert data["counts"] == {"passed": 1, "failed": 0, "xfailed": 0, "recommended-failed": 0, "skipped": 0,
                              "required-failed": 0, "not-tested": {}}
    assert decode_results(text) == results  # a lone surrogate in a message survives (escaped JSON)


@pytest.mark.parametrize("doc, field", [
    ({"results": []}, "'impl'"),
    ({"impl": "x", "results": [{"id": "a", "outcome": "weird", "message": ""}]},
     "'results[0].outcome': Invalid enum value 'weird'"),
    ({"impl": "x", "results": [{"id": "a", "outcome": "passed"}]},
     "'results[0]': Object missing required field 'message'"),
    ({"impl": "x", "counts": {"passed": "1"}, "results": []}, "'counts.passed': Expected 'int'"),
    ([], "Expected 'object', got 'array'"),
    # another tool's results: pytest-json-report's report
    ({"created": 1.0, "duration": 2.0, "exitcode": 0, "root": "/x", "summary": {"passed": 3, "total": 3},
      "tests": [{"nodeid": "t.py::test_a", "outcome": "passed"}]}, "missing required field 'impl'"),
])
def test_a_file_that_is_no_results_json_is_one_line_naming_the_field(tmp_path, doc, field):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ResultsFileError) as info:
        load_results(tmp_path)  # the --report-dir folder holding it
    message = str(info.value)
    assert "\n" not in message and str(path) in message and field in message, message


@pytest.mark.parametrize("command", ["compare", "site"])
def test_report_commands_refuse_a_bad_results_json_with_exit_2(tmp_path, command):
    bad = tmp_path / "results.json"
    bad.write_text(json.dumps({"impl": "x", "results": [{"id": "a", "outcome": "fine", "message": ""}]}))
    extra = ["--out", str(tmp_path / "site")] if command == "site" else []
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "report", command, str(bad), *extra],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert str(bad) in done.stderr and "'results[0].outcome'" in done.stderr


# -- the testee protocol's frames ---------------------------------------------------------------
def test_every_request_the_runner_sends_is_a_published_frame(monkeypatch):
    sent: list[dict] = []
    write = protocol.write_frame

    def recording(stream, message):
        sent.append(message)
        write(stream, message)

    monkeypatch.setattr(protocol, "write_frame", recording)
    adapter = SubprocessAdapter("python -m reference_impl.testee")
    try:
        value = adapter.classes()["AbortReq"](rid="r")
        for transport in adapter.transports:
            adapter.decode(adapter.encode(value, transport), transport)
        adapter.validate_http("AbortReq", '{"rid": "r"}')
    finally:
        adapter.close()
    kinds = {type(msgspec.convert(m, frames.Request)).__name__ for m in sent}
    assert {"Start", "Encode", "Decode", "Http", "Stop"} <= kinds, kinds


def test_a_malformed_answer_names_the_frame_and_the_member():
    hello = {"type": "started", "protocol": 2, "tensors": "values", "implementation": {"name": "x", "version": 1},
             "manifest": "sglang-0.5.23"}
    started = r"^malformed 'started' frame from the testee: 'implementation\.version': Expected 'str', got 'int'$"
    with pytest.raises(protocol.ProtocolError, match=started):
        protocol.check_started(hello)
    with pytest.raises(protocol.ProtocolError, match=r"^malformed 'result' frame from the testee: 'message': "):
        protocol.check_result({"id": 1, "result": "parse_error", "message": 3}, 1)


# -- the refusal corpus --------------------------------------------------------------------------
def test_the_refusal_corpus_reads_through_its_struct():
    text = (ROOT / "golden" / "sglang-0.5.23" / refusals.FILE).read_text()
    cases = refusals.load(text)
    decode = next(c for c in cases if c.kind == "decode")
    assert isinstance(decode.payload, bytes) and decode.category == "parse_error"
    doc = json.loads(text)
    doc["cases"][0]["category"] = "serialize_error"
    with pytest.raises(ValueError, match=r"'cases\[0\]': .*decode case is refused with parse_error"):
        refusals.load(json.dumps(doc))
    del doc["cases"][0]["payload"]
    doc["cases"][0]["category"] = "parse_error"
    with pytest.raises(ValueError, match="a decode case has a payload"):
        refusals.load(json.dumps(doc))


@pytest.mark.parametrize("command", ["compare", "site"])
def test_report_commands_refuse_a_junit_file_in_one_line(tmp_path, command):
    """A JUnit XML file given where a results.json belongs: one line, exit 2, no counts."""
    junit = tmp_path / "junit.xml"
    junit.write_text('<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="1"/></testsuites>')
    extra = ["--out", str(tmp_path / "site")] if command == "site" else []
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "report", command, str(junit), *extra],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1 and "not JSON" in done.stderr and str(junit) in done.stderr
