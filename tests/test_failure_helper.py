"""Every check fails through the one failure helper (conformance/suite/failure.py): its message
names the step, the input, every difference, the requirement and the replay command. A bare
`assert`, `pytest.fail(...)` or `raise AssertionError(...)` in a suite module gives none of that,
so this test refuses them in every module of conformance/suite, the ones added later included."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parents[1] / "conformance" / "suite"
#: the helper itself raises the exceptions it builds
HELPER = SUITE / "failure.py"


def bare_failures(source: str, name: str = "<module>") -> list[str]:
    """'line: what' for each way of failing a check around the helper, in line order."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Assert):
            found.append((node.lineno, "bare assert"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "fail" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "pytest":
            found.append((node.lineno, "pytest.fail(...)"))
        elif isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id in ("AssertionError", "Failed"):
                found.append((node.lineno, f"raise {exc.id}"))
    return [f"{line}: {what}" for line, what in sorted(found)]


def suite_modules() -> list[Path]:
    return sorted(p for p in SUITE.glob("*.py") if p != HELPER)


def test_the_scan_finds_every_way_around_the_helper():
    planted = ("import pytest\ndef test_x(ipc):\n    assert ipc\n    pytest.fail('no')\n"
               "    raise AssertionError('no')\n    raise AssertionError\n")
    assert bare_failures(planted) == ["3: bare assert", "4: pytest.fail(...)", "5: raise AssertionError",
                                      "6: raise AssertionError"]
    assert bare_failures("from conformance.suite.failure import fail\ndef test_x(ipc):\n"
                         "    if not ipc:\n        fail('x', 'R-MSG-1', ipc=ipc)\n") == []


@pytest.mark.parametrize("module", suite_modules(), ids=lambda p: p.name)
def test_a_suite_module_fails_only_through_the_helper(module):
    found = bare_failures(module.read_text(), str(module))
    assert not found, (f"{module.relative_to(SUITE.parents[1])} fails around conformance/suite/failure.py "
                       f"(use fail(what, requirement, step=..., data=..., value=..., ipc=ipc)):\n  "
                       + "\n  ".join(found))


# -- one planted failure per check module: every part of its message there, and true ------------
#: module -> (the planted implementation, the check it fails, words of its step, its requirement,
#: its input line: "bytes" (hex), "json" or None). The other modules' planted failures are
#: tests/test_failure_messages.py's (EXPECTED); test_e2e.py needs a server (--e2e), test_peer.py
#: a --peer release and test_generated.py's own failure a catalogue without the struct: their
#: failures go through the same helper, as the scan above shows.
PLANTED = {
    "test_catalogue.py": ("defective_adapters:ReorderedFields", "Required.Catalogue.FlushCacheReqInput.MatchesManifest",
                          "live catalogue", "R-MSG-10", None),
    "test_security.py": ("defective_adapters:UnpicklesWireBytes",
                         "Required.Security.top_level.NoPickleFromUntrustedPeer",
                         "receive path for an untrusted peer", "R-PW-5", "bytes"),
    "test_strict_peers.py": ("defective_adapters:UnpicklesWireBytes", "Required.Security.field.WrapperStaysClosed",
                             "receive path for an untrusted peer", "R-PW-5", "bytes"),
    "test_sockets.py": ("defective_adapters:UnsafeZeroCopy", "Required.ZeroCopy.msgpack.BufferReuseSafe",
                        "zero-copy send", "R-TRN-3", None),
    "test_unwrap.py": ("defective_adapters:DropsTraceUnderMsgpack",
                       "Required.Trace.BatchStrOutput.ContextSurvivesForwarding.msgpack", "twice", "R-TRACE-3",
                       None),
    "test_spec_rules.py": ("spec_rule_adapters:NativeByteOrder",
                           "Required.ByteOrder.BatchStrOutput.BigEndianKept.encode", "encode of the runner's value",
                           "R-EXT-6", "bytes"),
    "test_http.py": ("planted_modules:PlantedModules", "Required.Http.AbortReq.RejectsUnknownKey",
                     "HTTP JSON validation", "R-HTTP-2", "json"),
    "test_receive_paths.py": ("planted_modules:PlantedModules", "Required.ReceivePath.AbortReq.Controller.msgpack",
                              "receive paths", "R-PW-3", None),
    "test_tensor_memory.py": ("planted_modules:PlantedModules", "Required.TensorMemory.ndarray.OwnsMemory.msgpack",
                              "receive buffer", "R-TEN-5", "bytes"),
    "test_tensors.py": ("planted_modules:PlantedModules", "Required.Tensor.cuda_0.DeviceKept",
                        "decode of bytes the runner wrote", "R-TEN-3", "bytes"),
    "test_payloads.py": ("planted_modules:PlantedModules",
                         "Required.Payload.TokenizedGenerateReqInput.time_stats.StateKept.msgpack",
                         "receive path (unwrap)", "R-PW-1", None),
    "test_accepts.py": ("planted_modules:PlantedModules", "Required.Accepts.BeamSearchSequence.MapUnknownKey",
                        "decode of bytes the runner wrote", "R-MSG-4", "bytes"),
}


def _line(message: str, name: str) -> str:
    found = [line.strip()[len(name) + 1:].strip() for line in message.splitlines()
             if line.strip().startswith(name + ":")]
    assert found, f"no '{name}:' line in:\n{message}"
    return found[0]


@pytest.fixture(scope="module")
def planted_runs(tmp_path_factory) -> dict:
    """One run per planted implementation, of the checks it is planted for: (stdout, records)."""
    import json
    import os
    import subprocess
    import sys

    root = SUITE.parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests")])}
    runs = {}
    for impl in sorted({impl for impl, *_ in PLANTED.values()}):
        report = tmp_path_factory.mktemp("planted") / "results.json"
        select = " or ".join(check for i, check, *_ in PLANTED.values() if i == impl)
        proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--impl", impl, "--report", str(report),
                               "--", "-k", select, "-p", "no:randomly"],
                              capture_output=True, text=True, env=env, cwd=root, timeout=600)
        records = {r["id"]: r for r in json.loads(report.read_text())["results"]} if report.exists() else {}
        runs[impl] = (proc.stdout, records)
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(PLANTED))
def test_a_planted_failure_of_each_module_names_every_part(planted_runs, module):
    import shlex

    impl, check_id, step, requirement, kind = PLANTED[module]
    stdout, records = planted_runs[impl]
    record = records.get(check_id)
    assert record is not None and record["outcome"] == "failed", (record, stdout[-3000:])
    message = record["message"]
    assert step in _line(message, "step"), message
    assert _line(message, "requirement") == f"SPEC {requirement}", message
    if kind == "bytes":
        assert re.fullmatch(r"\d+ bytes [0-9a-f]{2}( [0-9a-f]{2})*( \.\.\.)?", _line(message, "input")), message
    elif kind == "json":
        assert _line(message, "input").startswith("JSON {"), message
    words = shlex.split(_line(message, "replay"))
    assert words[:4] == ["ipc-conformance", "run", "--impl", impl] and words[-2:] == ["-k", check_id], words
    first = message.splitlines()[0]
    assert stdout.count(first) == 1, f"printed {stdout.count(first)} times, not once:\n{stdout[-4000:]}"
    assert message.rstrip() in stdout, "the message is not printed whole"
    others = set(records) - {check_id}
    assert not any(other in message.replace(f"'{check_id}'", "") for other in others), message  # no other check


@pytest.mark.slow
def test_a_testee_failure_names_its_own_request_once_with_a_whole_runnable_replay(tmp_path):
    """A testee's HTTP bridge refuses a body it must take: the failure names that one request (not
    the previous check's, not twice), and its replay command, whole, runs and reproduces it."""
    import json
    import os
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    root = SUITE.parents[1]
    impl = "cmd:python -m reference_impl.testee --break http-factory-required"
    check_id = "Required.Http.ListExternalCorporaReqOutput.OmittedFieldsTakeDefaults"
    env = {**os.environ, "PYTHONPATH": str(root), "IPC_TESTEE_REPLAY_DIR": str(tmp_path / "frames")}
    report = tmp_path / "results.json"
    subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--impl", impl, "--transport", "msgpack",
                    "--report", str(report), "--", "-k", "Http and ListExternalCorporaReqOutput"],
                   capture_output=True, text=True, env=env, cwd=root, timeout=600)
    records = {r["id"]: r for r in json.loads(report.read_text())["results"]}
    assert records["Required.Http.ListExternalCorporaReqOutput.RejectsUnknownKey"]["outcome"] == "passed"  # ran before
    message = records[check_id]["message"]
    requests = [line.strip() for line in message.splitlines() if line.strip().startswith("request: ")]
    assert requests == ["request: http struct=ListExternalCorporaReqOutput json='{\"success\": false}'"], message
    assert message.count("step: ") == 1 and "no_such_field" not in message, message  # nothing of the check before
    words = shlex.split(_line(message, "reproduce"))
    assert words[:3] == ["ipc-conformance", "testee", "replay"] and words[4:] == ["--impl", words[5]], words
    assert Path(words[3]).is_file() and words[5].endswith("--break http-factory-required"), words
    replayed = subprocess.run([sys.executable, "-m", "conformance.cli", *words[1:]], capture_output=True, text=True,
                              env=env, cwd=root, timeout=300)
    assert replayed.returncode == 1 and "corpus_token_counts: Field required" in replayed.stdout, replayed.stdout
