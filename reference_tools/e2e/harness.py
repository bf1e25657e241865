"""Start a real reference server in a subprocess, talk to it, stop it, prove nothing is left.

ServerProcess runs ``python -m reference_impl.server`` (or ``ipc-conformance serve``)
in its own session with a tap and a trace directory, waits for /health, and on
stop() sends the signal, waits (hard timeout, then SIGKILL of the whole group) and
reports leftovers: child processes still alive and the IPC directory still on disk.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

import httpx

START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
HTTP_TIMEOUT_S = 30.0
PYTHON = sys.executable
CLI = str(Path(sys.executable).with_name("ipc-conformance"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@dataclass
class ServerProcess:
    """One reference server in its own session: the E2E runs (tap and trace on) and the
    reliability tests (tap and trace off unless asked: they cost time under load) start it."""

    workdir: Path
    transport: str = "msgpack"
    dp_size: int = 1
    extra_args: tuple[str, ...] = ()
    use_cli: bool = False
    env: dict = field(default_factory=dict)
    tap: bool = True
    trace: bool = True
    #: --request-timeout of the server (None: the server's own default)
    request_timeout_s: Optional[float] = 60.0
    log_level: Optional[str] = None
    start_timeout_s: float = START_TIMEOUT_S
    port: int = field(default_factory=free_port)
    proc: Optional[subprocess.Popen] = None
    info: dict = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def tap_dir(self) -> Path:
        return self.workdir / "tap"

    @property
    def trace_dir(self) -> Path:
        return self.workdir / "trace"

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    @property
    def pids(self) -> dict[str, int]:
        """The server and every engine process it reported, by name."""
        out = {"server": self.proc.pid} if self.proc else {}
        out.update(self.info.get("pids", {}))
        return out

    def command(self) -> list[str]:
        head = [CLI, "serve"] if self.use_cli else [PYTHON, "-m", "reference_impl.server"]
        return head + ["--port", str(self.port), "--device", "cpu", "--dp-size", str(self.dp_size),
                       "--ipc-transport", self.transport,
                       *(["--tap-dir", str(self.tap_dir)] if self.tap else []),
                       *(["--trace-dir", str(self.trace_dir)] if self.trace else []),
                       *(["--request-timeout", f"{self.request_timeout_s:g}"] if self.request_timeout_s else []),
                       *(["--log-level", self.log_level] if self.log_level else []), *self.extra_args]

    def start(self) -> "ServerProcess":
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env}
        env.pop("IPC_TRANSPORT", None)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode} during startup:\n{self.log_tail()}")
            try:
                if self.health(timeout=2).status_code == 200:
                    self.info = self.server_info()
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"server not healthy within {self.start_timeout_s:.0f} s:\n{self.log_tail()}")

    def health(self, timeout: float = 5.0) -> httpx.Response:
        return httpx.get(self.url + "/health", timeout=timeout)

    def server_info(self) -> dict:
        return httpx.get(self.url + "/get_server_info", timeout=10).json()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def wait_exit(self, timeout: float) -> Optional[int]:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, sig: int = signal.SIGTERM) -> dict:
        """Signal the server, wait; the exit code, whether it hung, and what was left (must be nothing)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.wait_exit(STOP_TIMEOUT_S)
        hung = code is None
        if hung:
            self.kill()
            code = self.proc.returncode
        self._log.close()
        return {"exit_code": code, "hung": hung, **self.leftovers()}

    def leftovers(self) -> dict:
        """Engine processes still alive and the IPC directory still on disk (both must be none);
        then removes whatever was left, so a failing check leaves no litter either."""
        time.sleep(0.2)
        alive = {name: pid for name, pid in self.pids.items() if pid_alive(pid)}
        for pid in alive.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        ipc_dir = self.info.get("ipc_dir")
        left = bool(ipc_dir and Path(ipc_dir).exists())
        if left:
            shutil.rmtree(ipc_dir, ignore_errors=True)
        return {"orphans": alive, "ipc_dir_left": left}

    def kill(self) -> None:
        """The whole process group and every engine process, at once; the IPC directory removed."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        for pid in self.info.get("pids", {}).values():
            if pid_alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self.info.get("ipc_dir"):
            shutil.rmtree(self.info["ipc_dir"], ignore_errors=True)


# -- HTTP helpers ----------------------------------------------------------------------
class Client:
    def __init__(self, url: str, timeout: float = HTTP_TIMEOUT_S) -> None:
        self.http = httpx.Client(base_url=url, timeout=timeout)

    def post(self, path: str, body: Any = None, headers: Optional[dict] = None, raw: Optional[bytes] = None
             ) -> httpx.Response:
        if raw is not None:
            return self.http.post(path, content=raw, headers=headers)
        return self.http.post(path, json=body, headers=headers)

    def ok(self, path: str, body: Any = None, headers: Optional[dict] = None) -> Any:
        r = self.post(path, body, headers)
        assert r.status_code == 200, f"{path} -> {r.status_code}: {r.text}"
        return r.json()

    def stream(self, path: str, body: Any, headers: Optional[dict] = None) -> Iterator[Any]:
        """SSE events as parsed JSON, until [DONE] (which must come)."""
        with self.http.stream("POST", path, json=body, headers=headers) as r:
            assert r.status_code == 200, f"{path} -> {r.status_code}: {r.read().decode()}"
            done = False
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                payload = line[len("data: "):]
                if payload == "[DONE]":
                    done = True
                    break
                yield json.loads(payload)
            assert done, f"{path}: stream ended without [DONE]"

    def get(self, path: str) -> httpx.Response:
        return self.http.get(path)

    def close(self) -> None:
        self.http.close()
