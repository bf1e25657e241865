"""Every subcommand, given a user's mistake, says what was wrong in one line and exits 2: never a
traceback. A run still ends with its `conformance:` line."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import __version__
from conformance.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
MISSING = "/nonexistent/results.json"
MANIFEST = "spec/manifests/sglang-0.5.23.json"  # valid JSON, but no results

#: argv -> a word the one error line must contain (what was wrong).
MISTAKES = {
    ("codegen", "nosuch-1.0"): "no manifest 'nosuch-1.0'",
    ("codegen", __file__): "is not a manifest",
    ("schema", "diff", "nosuch-1.0", "sglang-0.5.23"): "no manifest 'nosuch-1.0'",
    ("schema", "verify", "sglang-0.5.23", "nosuch-1.0"): "no manifest 'nosuch-1.0'",
    ("golden", "check", "--manifest", "nosuch-1.0"): "no manifest 'nosuch-1.0'",
    ("golden", "update", "--manifest", "nosuch-1.0"): "no manifest 'nosuch-1.0'",
    ("coverage", "--manifest", "nosuch-1.0"): "no manifest 'nosuch-1.0'",
    ("manifest", "extract", "path/to/io_struct.py"): "path/to/io_struct.py: no such file or directory",
    ("manifest", "extract", "nosuch_package.io_struct"): "cannot import 'nosuch_package.io_struct'",
    ("smoke", "--impl", "nosuch"): "no implementation 'nosuch'",
    ("smoke", "--impl", "cmd:/nonexistent/testee"): "no program '/nonexistent/testee'",
    ("testee", "replay", "/nonexistent/x.frame", "--impl", "cmd:true"): "cannot read the saved request",
    ("testee", "replay", __file__, "--impl", "cmd:true"): "is not a saved request frame",
    ("report", "compare", MISSING): "cannot read results",
    ("report", "compare", MANIFEST): "is this a results.json",
    ("report", "site", MISSING, "--out", "/tmp/ipc-conformance-bad-input-site"): "cannot read results",
    ("report", "site", MANIFEST, "--out", "/tmp/ipc-conformance-bad-input-site"): "is this a results.json",
    ("bench", "codec", "--nosuch"): "unrecognized arguments",
    ("bench", "codec", "--impl", "nosuch"): "unknown implementation(s) ['nosuch']",
    ("bench", "codec", "--max-tensor-bytes", "lots"): "not a size: 'lots'",
    ("bench", "serve", "--rounds", "0"): "--rounds must be >= 1",
    ("bench", "serve", "--model", "/nonexistent"): "--model /nonexistent: no config.json",
    ("bench", "serve", "--concurrency", "0"): "need positive integers",
    ("codegen", "sglang-0.5.23", "--out", "/nonexistent/io_struct.py"): "/nonexistent/io_struct.py: no such file",
    ("coverage", "--manifest", "sglang-0.5.14"): "sglang-0.5.14 is a dataclass catalogue",
    ("golden", "diff", "nosuch-1.0", "sglang-0.5.23"): "no manifest 'nosuch-1.0'",
    ("golden", "check", "--manifest", "sglang-0.5.14"): "sglang-0.5.14 is a dataclass catalogue",
    ("manifest", "extract"): "give a module name",
    ("manifest", "extract", "--source", "README.md"): "give a .py file, a package or checkout directory",
    ("manifest", "extract", "reference_impl.io_struct", "--root", "Nosuch"): "--root Nosuch: no class",
    ("manifest", "extract", "reference_impl.io_struct", "--exclude", "AbortReqq"): "did you mean AbortReq?",
    ("manifest", "extract", "reference_impl.io_struct", "--array-typecode", "Z"): "invalid choice: 'Z'",
    ("manifest", "extract", "reference_impl.io_struct", "-o", "/nonexistent/m.json"): "/nonexistent/m.json: no such",
    ("schema", "diff", "live:nosuch_module", "sglang-0.5.23"): "cannot import 'nosuch_module'",
    ("schema", "diff", "sglang-0.5.22", "sglang-0.5.23", "--check", "LOOSE"): "invalid choice: 'LOOSE'",
    ("schema", "verify"): "give OLD and NEW",
    ("schema", "verify", "sglang-0.5.14", "sglang-0.5.15"): "sglang-0.5.14 is a dataclass catalogue",
    ("schema", "verify", "--all", "--write-silent", "/nonexistent/silent.json"): "no folder /nonexistent",
    ("schema", "check", "--impl", "nosuch"): "no implementation 'nosuch'",
    ("schema", "check", "--source", "/nonexistent"): "--source '/nonexistent': no such file",
    ("schema", "check", "--manifest", "nosuch-1.0"): "no manifest 'nosuch-1.0'",
    ("schema", "check", "--manifest", "sglang-0.5.23", "--against", "nosuch-1.0"): "no manifest 'nosuch-1.0'",
    ("schema", "check", "--manifest", "sglang-0.5.23", "--allow", "AbortReq:no-such-rule"): "a declared change reads",
    ("schema", "check", "--manifest", "sglang-0.5.23", "--allow-file", "/"): "--allow-file / is a folder",
    ("schema", "check", "--manifest", "sglang-0.5.23", "--version", "1.0"): "--version goes with --source",
    ("schema", "check", "--manifest", "sglang-0.5.23", "--module", "a.b"): "--module goes with --source",
    ("schema", "check", "--source", ".", "--version", "one"): "--version 'one': not a PEP 440 version",
    ("schema", "check", "--source", ".", "--module", "a..b"): "--module 'a..b': not a dotted module name",
    ("schema", "check", "--source", "/nonexistent", "--against", "sglang-9.9.9"): "no manifest 'sglang-9.9.9'",
    ("smoke", "--manifest", "nosuch-1.0"): "no manifest 'nosuch-1.0'",
    ("testee", "replay", "/", "--impl", "cmd:true"): "cannot read the saved request '/'",
    ("testee", "replay"): "the following arguments are required",
}


@pytest.mark.parametrize("argv", list(MISTAKES), ids=" ".join)
def test_a_mistake_is_one_line_and_exit_2(argv, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse's own usage errors
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert MISTAKES[argv] in err
    assert len([line for line in err.splitlines() if "error" in line.lower()]) == 1, err


#: `ipc-conformance run` mistakes: one line from pytest, then `conformance: error: ` and the same words, last.
RUN_MISTAKES = {
    ("--impl", "nosuch"): "no implementation 'nosuch'",
    ("--impl", "no_such_module:Adapter"): "cannot import 'no_such_module'",
    ("--impl", "os:path"): "not a conformance.adapters.Adapter",
    ("--impl", "cmd:false"): "failed the start handshake",
    ("--manifest", "nosuch-1.0"): "no manifest 'nosuch-1.0'",
    ("--peer", "nosuch-1.0"): "no manifest 'nosuch-1.0'",
    ("--expectations", "/nonexistent/list.txt"): "no expected-failure list",
    ("--peer", "sglang-0.5.14"): "--peer sglang-0.5.14: a dataclass catalogue",
    ("--report", "/nonexistent/results.json"): "--report /nonexistent/results.json: no folder",
    ("--report-dir", "/proc/no-such-dir"): "--report-dir /proc/no-such-dir: cannot create it",
}

#: Mistakes argparse finds: its own line, and a last line that says the run did not start.
RUN_USAGE = {
    ("--transport", "bogus"): "invalid choice: 'bogus'",
    ("-n", "bogus"): "not a number of workers: 'bogus'",
    ("--hypothesis-profile", "bogus"): "invalid choice: 'bogus'",
}


@pytest.mark.parametrize("argv", list(RUN_USAGE), ids=" ".join)
def test_a_run_option_mistake_ends_with_an_error_line(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run", *argv])
    out, err = capsys.readouterr()
    assert exit_.value.code == 2
    assert RUN_USAGE[argv] in err and "Traceback" not in err
    # the last line cannot be read as a clean run: it says the run did not start, and why
    last = out.strip().splitlines()[-1]
    assert last.startswith("conformance: error: ") and RUN_USAGE[argv] in last, last


@pytest.mark.slow
@pytest.mark.parametrize("argv", list(RUN_MISTAKES), ids=" ".join)
def test_a_run_mistake_ends_with_an_error_line(argv):
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", *argv, "--", "-k", "Primitive"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, "CI": ""})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out
    assert RUN_MISTAKES[argv] in out
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("conformance: error: ") and RUN_MISTAKES[argv] in last, last


def test_a_run_that_selects_no_check_says_so_and_exits_5():
    """Not a usage error, not a clean run: its own last line and pytest's exit status 5 (README)."""
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--", "-k", "NoSuchCheckAnywhere"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 5, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "conformance: no checks selected (nothing ran; exit status 5)"


def test_an_interrupted_run_does_not_end_with_counts():
    """Stopped after two checks: the counts of what ran, then a last line that says it stopped."""
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--transport", "msgpack", "--",
                           "-k", "Primitive", "-p", "interrupting_plugin"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])})
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert lines[-2] == "conformance: 2 passed, 0 failed (0 listed), 0 recommended failed, 0 not tested", lines
    assert lines[-1].startswith("conformance: error: the run stopped before its end"), lines


#: `ipc-conformance serve` mistakes, found before any engine process starts (serve ends its own
#: process, so these run in a subprocess).
SERVE_MISTAKES = {
    ("--model", "/nonexistent"): "--model /nonexistent: no config.json there",
    ("--port", "99999"): "port must be 0-65535, got 99999",
    ("--port", "http"): "argument --port: invalid int value: 'http'",
    ("--dp-size", "0"): "dp_size must be >= 1, got 0",
    ("--device", "tpu"): "unknown device 'tpu'; choose auto, cpu or cuda",
    ("--context-length", "-5"): "context_length must be >= 1, got -5",
    ("--nosuch",): "unrecognized arguments: --nosuch",
    ("--load-balance-method", "shortest_queue"): "argument --load-balance-method: invalid choice: 'shortest_queue'",
}


@pytest.mark.parametrize("argv", list(SERVE_MISTAKES), ids=" ".join)
def test_a_serve_mistake_is_one_line_and_exit_2(argv):
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "serve", *argv], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line.lower()]
    assert len(errors) == 1 and SERVE_MISTAKES[argv] in errors[0], proc.stderr
    assert errors[0].startswith("ipc-conformance serve: error: ")


def _leaves(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command a user can type: each subcommand that has no subcommands of its own."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [words]
    return [leaf for name, sub in subs[0].choices.items() for leaf in _leaves(sub, (*words, name))]


def test_the_walk_covers_every_subcommand():
    """A new subcommand gets its mistakes here: the walk names each one at least once."""
    walked = {argv[:2] for argv in MISTAKES} | {argv[:1] for argv in MISTAKES} | {("run",), ("serve",)}
    missing = [" ".join(leaf) for leaf in _leaves(build_parser()) if leaf not in walked]
    assert not missing, f"subcommands with no user mistake in tests/test_bad_input.py: {missing}"


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"ipc-conformance {__version__}"
