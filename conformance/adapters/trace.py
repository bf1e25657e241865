"""An implementation's own tracing, enabled, across real processes (capability ``trace``;
checks ``Required.Trace.<Hop>.OneLinkedTrace.<transport>``, SPEC R-TRACE-4).

    tokenizer_manager --its send, real ZeroMQ--> controller --its send--> scheduler
    (opens the request's trace      (receives, unwraps, continues    (receives, unwraps,
     from the client's traceparent)  the trace, forwards)             continues the trace)

Each hop is a separate process started by ``run_chain`` with the transport selected as the
implementation's users select it (an environment variable set before it starts). Each runs the
adapter's driver module (``Adapter.trace_driver``) as ``python -m <driver> <role> <workdir>
<ipc_dir>`` and writes the spans its own tracing exported, as JSON, to
``<workdir>/<role>.spans.json`` (``write_spans``). The request it sends is
``<workdir>/request.pickle`` (the suite's instance, pickled by the runner), the client's
traceparent ``<workdir>/traceparent``. A process that has not finished within the bound is
killed and the run fails naming it. Drivers import this module for the endpoints and the
span format; it imports nothing of any implementation.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

#: The processes of the chain, in the order the request crosses them.
ROLES = ("tokenizer_manager", "controller", "scheduler")
#: The client's span: what the tokenizer manager's first span must be a child of.
CLIENT_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CLIENT_TRACE_ID}-{CLIENT_SPAN_ID}-01"
#: How long the whole chain may take (importing an engine can take seconds on a busy machine).
DEFAULT_TIMEOUT_S = 120.0
TIMEOUT_ENV = "IPC_TRACE_TIMEOUT_S"  # the runner's bound, told to each process


class TraceRunError(RuntimeError):
    """The chain did not run: a process hung (killed after the bound), failed, or wrote no spans."""


@dataclass(frozen=True)
class Span:
    """One exported span, ids in W3C hex (trace 32 digits, span 16)."""

    process: str
    pid: int
    name: str
    trace_id: str
    span_id: str
    parent_id: Optional[str]
    start_ns: int = 0
    links: tuple[str, ...] = ()  # span ids this span links to


@dataclass
class TraceRun:
    """What one run of the chain exported."""

    transport: str
    traceparent: str
    roles: Sequence[str] = ROLES
    spans: list[Span] = field(default_factory=list)
    pids: dict[str, int] = field(default_factory=dict)

    def of(self, role: str) -> list[Span]:
        return sorted((s for s in self.spans if s.process == role), key=lambda s: (s.start_ns, s.name))


# -- the driver side (imported by an implementation's driver module) --------------------------
def endpoint(ipc_dir: str, role: str) -> str:
    """The ipc:// endpoint a role binds its receiving socket to."""
    return f"ipc://{os.path.join(ipc_dir, role)}"


def driver_args(argv: Optional[Sequence[str]] = None) -> tuple[str, Path, str]:
    """A driver's command line: role, workdir, ipc_dir."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3 or args[0] not in ROLES:
        raise SystemExit(f"usage: <driver> {{{','.join(ROLES)}}} <workdir> <ipc_dir>; got {args}")
    return args[0], Path(args[1]), args[2]


def recv_timeout_ms() -> int:
    """How long a driver's receiver waits for its message: a little over the runner's bound (the
    runner kills what is still running at its bound and names it)."""
    return int((float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)) + 5.0) * 1000)


def read_request(workdir: Path) -> tuple[Any, str]:
    """The request the tokenizer manager sends, and the client's traceparent."""
    with open(workdir / "request.pickle", "rb") as f:
        request = pickle.load(f)  # written by the runner in this run's own directory
    return request, (workdir / "traceparent").read_text().strip()


def write_spans(workdir: Path, role: str, spans: Sequence[Mapping[str, Any]]) -> None:
    """The spans a process exported (keys of Span but process and pid), as JSON."""
    out = [{**dict(s), "process": role, "pid": os.getpid()} for s in spans]
    tmp = workdir / f"{role}.spans.json.tmp"
    tmp.write_text(json.dumps(out))
    tmp.replace(workdir / f"{role}.spans.json")


def otel_span_record(span: Any) -> dict[str, Any]:
    """An OpenTelemetry SDK ReadableSpan as write_spans takes it."""
    ctx = span.get_span_context()
    return {"name": span.name, "trace_id": f"{ctx.trace_id:032x}", "span_id": f"{ctx.span_id:016x}",
            "parent_id": f"{span.parent.span_id:016x}" if span.parent is not None else None,
            "start_ns": int(span.start_time or 0),
            "links": [f"{link.context.span_id:016x}" for link in (span.links or ())]}


# -- the runner side (the suite) ---------------------------------------------------------------
def run_chain(driver: str, env: Mapping[str, str], workdir: Path, request: Any, *, prelude: str = "",
              timeout_s: float = DEFAULT_TIMEOUT_S, transport: str = "?") -> TraceRun:
    """Start the three processes of the chain (receivers first), wait for all within timeout_s,
    and collect their spans. `env` is added to each process's environment (the transport switch);
    `prelude` is Python source each runs before the driver (a test hook that plants a defect)."""
    workdir.mkdir(parents=True, exist_ok=True)
    with open(workdir / "request.pickle", "wb") as f:
        pickle.dump(request, f, protocol=pickle.HIGHEST_PROTOCOL)
    (workdir / "traceparent").write_text(TRACEPARENT)
    ipc_dir = tempfile.mkdtemp(prefix="ipc-trace-")  # short: ipc:// paths are bounded (~100 bytes)
    code = f"{prelude}\nimport runpy\nrunpy.run_module({driver!r}, run_name='__main__', alter_sys=True)\n"
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for role in reversed(ROLES):
            with open(workdir / f"{role}.log", "wb") as log:
                procs[role] = subprocess.Popen(
                    [sys.executable, "-c", code, role, str(workdir), ipc_dir], stdout=log, stderr=subprocess.STDOUT,
                    env={**os.environ, **env, TIMEOUT_ENV: str(timeout_s)}, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            failed = [role for role in ROLES if procs[role].poll() not in (None, 0)]
            if failed:  # the others may wait for it forever: stop now
                role = failed[0]
                raise TraceRunError(f"the {role} process exited with status {procs[role].returncode}"
                                    f"{_log_tail(workdir, role)}")
            if all(proc.poll() is not None for proc in procs.values()):
                break
            time.sleep(0.05)
        else:
            hung = [role for role in ROLES if procs[role].poll() is None]
            raise TraceRunError(", ".join(f"the {role} process (pid {procs[role].pid})" for role in hung)
                                + f" hung: killed after {timeout_s:g} s{_log_tail(workdir, hung[0])}")
        for role in ROLES:
            if procs[role].returncode != 0:
                raise TraceRunError(f"the {role} process exited with status {procs[role].returncode}"
                                    f"{_log_tail(workdir, role)}")
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        shutil.rmtree(ipc_dir, ignore_errors=True)
    run = TraceRun(transport=transport, traceparent=TRACEPARENT)
    for role in ROLES:
        path = workdir / f"{role}.spans.json"
        if not path.exists():
            raise TraceRunError(f"the {role} process wrote no spans ({path.name}){_log_tail(workdir, role)}")
        for record in json.loads(path.read_text()):
            run.spans.append(Span(process=role, pid=int(record["pid"]), name=str(record["name"]),
                                  trace_id=str(record["trace_id"]), span_id=str(record["span_id"]),
                                  parent_id=record.get("parent_id"), start_ns=int(record.get("start_ns") or 0),
                                  links=tuple(record.get("links") or ())))
        run.pids[role] = procs[role].pid
    return run


def _log_tail(workdir: Path, role: str, lines: int = 1) -> str:
    """The last line of a process's output (its error, usually), for a one-line failure."""
    try:
        text = (workdir / f"{role}.log").read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    tail = " | ".join(line.strip() for line in text[-lines:] if line.strip())
    return f"; its last output: {tail[:300]} (log: {workdir / f'{role}.log'})" if tail else ""

