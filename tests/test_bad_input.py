"""Every subcommand, given a user's mistake, says what was wrong in one line and exits 2: never a
traceback. A run still ends with its `conformance:` line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import __version__
from conformance.cli import main

MISSING = "/nonexistent/results.json"

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
    ("report", "site", MISSING, "--out", "/tmp/ipc-conformance-bad-input-site"): "cannot read results",
    ("run", "--transport", "bogus"): "invalid choice: 'bogus'",
    ("bench", "codec", "--nosuch"): "unrecognized arguments",
}


@pytest.mark.parametrize("argv", list(MISTAKES), ids=" ".join)
def test_a_mistake_is_one_line_and_exit_2(argv, capsys):
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse's own usage errors
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert MISTAKES[argv] in err
    assert len([line for line in err.splitlines() if "error" in line.lower()]) == 1, err


ROOT = Path(__file__).resolve().parents[1]

#: `ipc-conformance run` mistakes: one line from pytest, then the summary as always.
RUN_MISTAKES = {
    ("--impl", "nosuch"): "no implementation 'nosuch'",
    ("--impl", "no_such_module:Adapter"): "cannot import 'no_such_module'",
    ("--impl", "os:path"): "not a conformance.adapters.Adapter",
    ("--impl", "cmd:false"): "failed the start handshake",
    ("--manifest", "nosuch-1.0"): "no manifest 'nosuch-1.0'",
    ("--peer", "nosuch-1.0"): "no manifest 'nosuch-1.0'",
    ("--expectations", "/nonexistent/list.txt"): "no expected-failure list",
}


@pytest.mark.slow
@pytest.mark.parametrize("argv", list(RUN_MISTAKES), ids=" ".join)
def test_a_run_mistake_still_ends_with_the_summary(argv):
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", *argv, "--", "-k", "Primitive"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, "CI": ""})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out
    assert RUN_MISTAKES[argv] in out
    assert proc.stdout.strip().splitlines()[-1] == "conformance: 0 passed, 0 failed, 0 skipped"


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"ipc-conformance {__version__}"
