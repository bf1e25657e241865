"""Drive headless Chromium through its DevTools protocol over --remote-debugging-pipe.

Chromium reads commands from fd 3 and writes replies and events to fd 4, each a JSON
message ended by a NUL byte: no port, no websocket client, only the standard library.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--remote-debugging-pipe"]


def find_chromium() -> Optional[str]:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class DevToolsError(RuntimeError):
    pass


class Browser:
    """One headless Chromium with a fresh profile and one page of a fixed viewport."""

    def __init__(self, binary: str, width: int = 1280, height: int = 900, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.width, self.height = width, height
        self._profile = tempfile.mkdtemp(prefix="site-chromium-")
        self._log = tempfile.TemporaryFile()  # a file, not a pipe: chromium's chatter must never block it
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def onto_3_and_4() -> None:  # in the child: its fd 3 reads our commands, fd 4 writes its replies
            r, w = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self._profile}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log,
            preexec_fn=onto_3_and_4, pass_fds=(3, 4))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next_id = 0
        self._buffer = b""
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    # -- the protocol --
    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise DevToolsError("chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                self._log.seek(0)
                raise DevToolsError(f"chromium closed the pipe: {self._log.read()[-2000:].decode(errors='replace')}")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, *, session: bool = False, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise DevToolsError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, event: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == event:
                    return self.events.pop(i)
            self.events.append(self._read_message(deadline))

    # -- what a test does with a page --
    def open(self, url: str) -> None:
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise DevToolsError(f"{expression!r:.80}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, x: float, y: float) -> None:
        """A real mouse click at viewport coordinates (press and release of the left button)."""
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", session=True, type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path: Path, height: Optional[int] = None) -> None:
        """The viewport (or its top `height` pixels) as a PNG."""
        x, y = self.evaluate("[scrollX, scrollY]")  # a clip is in page coordinates, not the viewport's
        clip = {"x": x, "y": y, "width": self.width, "height": height or self.height, "scale": 1}
        data = self.call("Page.captureScreenshot", session=True, format="png", clip=clip)["data"]
        Path(path).write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (DevToolsError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)
        self._log.close()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
