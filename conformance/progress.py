"""One line of progress on stderr for the commands that can run past a few seconds (golden
check/update, coverage, schema check, manifest extract --source): only when stderr is a
terminal, so CI logs, pipes and redirected output see nothing of it.

    with Progress("golden check", total=len(ids)) as progress:
        for manifest_id in ids:
            progress.step(manifest_id)   # "golden check: [3/9] sglang-0.5.17" in place
            ...

The line is rewritten in place (carriage return, erase to the end of the line), its seconds
ticking once a second while a step runs, and erased when the block ends (or `close()`, before
the command prints), so what the command prints starts on a clean line.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import IO, Optional

#: the line is cut to this many characters (a narrow terminal wraps a longer one)
WIDTH = 79


def shown(stream: Optional[IO[str]] = None) -> bool:
    """Whether progress goes to `stream` (default stderr): a terminal, nothing else."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class Progress:
    """The progress line of one command (a no-op unless stderr is a terminal)."""

    def __init__(self, what: str, total: Optional[int] = None, stream: Optional[IO[str]] = None) -> None:
        self.what = what
        self.total = total
        self.stream = sys.stderr if stream is None else stream
        self.enabled = shown(self.stream)
        self.count = 0
        self.started = time.monotonic()
        self._drawn = False
        self._text = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: Optional[threading.Thread] = None

    def step(self, label: str = "") -> None:
        """The next step begins: `label` says what it works on."""
        self.count += 1
        of = f"/{self.total}" if self.total is not None else ""
        self.show(f"[{self.count}{of}] {label}".rstrip())

    def show(self, text: str) -> None:
        """Rewrite the line: the command's name, `text` and the seconds so far."""
        if not self.enabled:
            return
        self._text = text
        self._draw()
        if self._ticker is None:  # the seconds tick while one long step runs
            self._stop.clear()
            self._ticker = threading.Thread(target=self._tick, name="ipc-conformance-progress", daemon=True)
            self._ticker.start()

    def _draw(self) -> None:
        with self._lock:
            line = f"{self.what}: {self._text} ({time.monotonic() - self.started:.0f} s)"
            if len(line) > WIDTH:
                line = line[:WIDTH - 3] + "..."
            self.stream.write(f"\r{line}\x1b[K")
            self.stream.flush()
            self._drawn = True

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            self._draw()

    def close(self) -> None:
        """Erase the line (the command's own output follows on a clean line)."""
        if self._ticker is not None:
            self._stop.set()
            self._ticker.join()
            self._ticker = None
        with self._lock:
            if self.enabled and self._drawn:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
                self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: Optional[type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()
