"""The long commands show one line of progress on a terminal's stderr, and nothing anywhere else
(a CI log, a pipe, a file)."""

from __future__ import annotations

import io
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.progress import Progress, shown

ROOT = Path(__file__).resolve().parents[1]
#: a long command made short: one manifest's golden vectors (built, then compared with golden/)
COMMAND = [sys.executable, "-m", "conformance.cli", "golden", "check", "--manifest", "sglang-0.5.23"]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_one_line_rewritten_in_place_and_erased_at_the_end():
    out = _Terminal()
    with Progress("golden check", total=2, stream=out) as progress:
        progress.step("sglang-0.5.22")
        progress.step("sglang-0.5.23")
    text = out.getvalue()
    assert "\rgolden check: [1/2] sglang-0.5.22 (0 s)\x1b[K" in text
    assert "\rgolden check: [2/2] sglang-0.5.23 (0 s)\x1b[K" in text
    assert "\n" not in text and text.endswith("\r\x1b[K")  # erased: the command's output starts clean


def test_no_progress_off_a_terminal():
    out = io.StringIO()
    with Progress("coverage", total=1, stream=out) as progress:
        progress.step("sglang-0.5.23")
        progress.show("value classes")
    assert out.getvalue() == "" and not shown(out)


def test_a_long_line_is_cut_to_the_terminal_width():
    out = _Terminal()
    Progress("schema check", stream=out).show("x" * 200)
    assert len(out.getvalue().split("\r")[1].removesuffix("\x1b[K")) == 79


def _on_a_pty(command: list[str]) -> tuple[int, str, str]:
    """Run command with stderr on a pseudo-terminal (stdout a pipe): its exit status, stdout and
    what the terminal received."""
    import pty

    primary, secondary = pty.openpty()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=secondary, stdin=subprocess.DEVNULL,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    os.close(secondary)
    received = b""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # the child closed the terminal (Linux: EIO)
                break
            if not chunk:
                break
            received += chunk
        elif proc.poll() is not None:
            break
    os.close(primary)
    stdout = proc.communicate(timeout=60)[0].decode()
    return proc.returncode, stdout, received.decode(errors="replace")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a pseudo-terminal as Linux gives one")
def test_a_long_command_shows_progress_on_a_terminal():
    code, stdout, terminal = _on_a_pty(COMMAND)
    assert code == 0, stdout + terminal
    assert "\rgolden check: [1/1] sglang-0.5.23: building its vectors (" in terminal
    assert terminal.endswith("\r\x1b[K")  # the line is erased before the command's own output
    assert stdout.strip() == "golden: up to date"  # stdout (a pipe) has no progress


def test_a_long_command_shows_no_progress_in_a_pipe():
    proc = subprocess.run(COMMAND, capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == "" and "\r" not in proc.stdout and "\x1b" not in proc.stdout
    assert proc.stdout.strip() == "golden: up to date"
