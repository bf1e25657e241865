"""Where msgpack's CPU goes beside pickle's, per engine process, per request and per message.

    python -m reference_tools.bench.profile_accounting PICKLE_DIR MSGPACK_DIR [--format markdown]

Each DIR is one server's ``bench serve --profile-dir`` output (``<base>/c<level>-<transport>``).
Every function's own time (cProfile tottime) falls in one bucket: the wire format (the
reference codec, pickle, msgpack, PickleWrapper unwrap, the receive path around them),
ZeroMQ, HTTP and the event loop, the model, the rest of the engine, or idle waits. Buckets
are divided by the requests the server answered (the states its tokenizer manager made,
warm-up included) and the wire-format bucket also by the messages the
process sent and received, so two runs of different lengths compare. A garbage collection is charged to whatever
function allocated when it began; the collector's own CPU time (``<process>.gc.json``) is
shown beside the buckets, so a bucket that jumps by about that much is read with care.
"""

from __future__ import annotations

import argparse
import json
import pstats
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .profiles import IDLE
from .tables import markdown_table, text_table

Func = tuple[str, int, str]

WIRE, ZMQ, HTTP, MODEL, ENGINE, WAITING = "wire format", "ZeroMQ", "HTTP + event loop", "model", "engine", "idle"
BUCKETS = (WIRE, ZMQ, HTTP, MODEL, ENGINE)

# reference_impl modules whose work is the wire format itself.
_WIRE_MODULES = {"codec.py", "ext.py", "pickle_wrapper.py", "pickle_scan.py", "wire_scan.py", "zmq_io.py",
                 "io_struct.py", "errors.py"}
# C functions (cProfile names them "~") that encode or decode a message.
_WIRE_BUILTINS = ("_pickle", "pickle.Pickler", "pickle.Unpickler", "msgspec.msgpack", "msgspec._core",
                  "msgspec.structs", "array._array_reconstructor", "method 'tobytes' of 'array.array'",
                  "built-in method _struct")
_HTTP_ROOTS = ("uvicorn", "starlette", "fastapi", "h11", "httptools", "anyio", "asyncio", "json", "sse_starlette",
               "selectors.py", "socket.py", "ssl.py")
_HTTP_BUILTINS = ("_socket", "_json", "_asyncio", "json.", "select.", "_contextvars", "method 'run' of")
# The receive path and the send path's wrappers in the engine package.
_ENGINE_WIRE = {("ipc.py", "_decode"), ("ipc.py", "unwrap_received"), ("ipc.py", "send"), ("ipc.py", "recv"),
                ("tracing.py", "__init__"), ("tracing.py", "__reduce__"), ("controller.py", "unwrap_on_receive")}
# Messages in and out of a process: the engine's receive and send functions.
_MESSAGE_FUNCS = {("ipc.py", "_decode"), ("zmq_io.py", "send"), ("zmq_io.py", "asend")}
# A request's state is made once (generate and encode are coroutines: cProfile counts each resume).
_REQUEST_FUNCS = {("tokenizer_manager.py", "_new_state")}


def own_bucket(func: Func) -> Optional[str]:
    """The bucket a function's own file names, or None for a function that works for whoever
    calls it (a builtin such as isinstance or dict.get, the standard library's typing or copy)."""
    filename, _line, name = func
    if any(word in name for word in IDLE):
        return WAITING
    if filename == "~":
        if any(word in name for word in _WIRE_BUILTINS):
            return WIRE
        if "zmq" in name:
            return ZMQ
        if "torch" in name:
            return MODEL
        if any(word in name for word in _HTTP_BUILTINS):
            return HTTP
        return None
    if filename.startswith("<"):
        return None  # code compiled at run time (an annotation's eval) or frozen: for its caller
    parts = Path(filename).parts
    base = parts[-1] if parts else filename
    if "reference_impl" in parts:
        if "engine" in parts:
            if (base, name) in _ENGINE_WIRE:
                return WIRE
            return MODEL if base in ("model.py", "weights.py", "stub_model.py", "sampling.py") else ENGINE
        return WIRE if base in _WIRE_MODULES or base.startswith("_codec") else ENGINE
    if "zmq" in parts:
        return ZMQ
    if "torch" in parts:
        return MODEL
    if "msgspec" in parts or base in ("pickle.py", "copyreg.py"):
        return WIRE
    if any(root in parts or base == root for root in _HTTP_ROOTS):
        return HTTP
    if "site-packages" not in parts and any(part.startswith("python3") for part in parts):
        return None  # the standard library
    return ENGINE


def _shares(func: Func, stats: dict[Func, Any], memo: dict[Func, dict[str, float]],
            visiting: set[Func]) -> dict[str, float]:
    """Bucket -> fraction of func's own time: its own bucket, or for a function that works for
    its callers, their buckets weighted by the time spent in it on each caller's behalf (a
    caller met again higher up the same chain, recursion, adds nothing)."""
    if func in memo:
        return memo[func]
    own = own_bucket(func)
    if own is not None:
        return memo.setdefault(func, {own: 1.0})
    callers = stats[func][4] if func in stats else {}
    visiting.add(func)
    spent = {caller: edge[2] for caller, edge in callers.items() if caller not in visiting}
    total = sum(spent.values())
    mixed: dict[str, float] = {}
    for caller in spent:  # own time on that caller's behalf
        weight = spent[caller] / total if total > 0 else 1 / len(spent)
        for name, share in _shares(caller, stats, memo, visiting).items():
            mixed[name] = mixed.get(name, 0.0) + weight * share
    visiting.discard(func)
    return memo.setdefault(func, mixed or {ENGINE: 1.0})


@dataclass
class ProcessAccount:
    """One process's own time per bucket (seconds) and the messages it sent and received."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys((*BUCKETS, WAITING), 0.0))
    messages: int = 0
    requests: int = 0
    collector: Optional[float] = None  # seconds in the garbage collector, charged within the buckets


def account(path: Path) -> ProcessAccount:
    acc = ProcessAccount()
    try:
        stats: dict[Func, Any] = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 - marshal and pstats raise several kinds: one line naming the file
        raise ValueError(f"{path}: not a cProfile file ({type(exc).__name__}: {exc})") from None
    memo: dict[Func, dict[str, float]] = {}
    for func, (_cc, calls, own, _cum, _callers) in stats.items():
        for name, share in _shares(func, stats, memo, set()).items():
            acc.seconds[name] += own * share
        key = (Path(func[0]).name, func[2])
        if key in _MESSAGE_FUNCS:
            acc.messages += calls
        if key in _REQUEST_FUNCS:
            acc.requests += calls
    collected = path.with_suffix(".gc.json")
    if collected.exists():
        try:
            acc.collector = float(sum(json.loads(collected.read_text())["seconds"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{collected}: not the collector's times ({type(exc).__name__}: {exc})") from None
    return acc


def accounts(directory: Path) -> tuple[dict[str, ProcessAccount], int]:
    """Every process's account in one server's profile folder, and the requests it answered."""
    found = {prof.stem: account(prof) for prof in sorted(directory.glob("*.prof"))}
    if not found:
        raise FileNotFoundError(f"{directory}: no <process>.prof files (bench serve --profile-dir writes them)")
    requests = sum(a.requests for a in found.values())
    if not requests:
        raise ValueError(f"{directory}: the tokenizer manager's profile shows no request (no _new_state call)")
    return found, requests


def render(pickle_dir: Path, msgpack_dir: Path, markdown: bool) -> str:
    pickled, pickle_requests = accounts(pickle_dir)
    packed, msgpack_requests = accounts(msgpack_dir)
    out = [f"pickle: {pickle_dir} ({pickle_requests} requests); msgpack: {msgpack_dir} ({msgpack_requests} requests)",
           "CPU ms per request (own time of the process's functions, idle waits left out); msgpack - pickle", ""]
    header = ["process", "bucket", "pickle ms/req", "msgpack ms/req", "msgpack - pickle"]
    rows: list[list[str]] = []
    for process in sorted(set(pickled) | set(packed)):
        p, m = pickled.get(process, ProcessAccount()), packed.get(process, ProcessAccount())
        for name in (*BUCKETS, "all"):
            ps = sum(p.seconds[b] for b in BUCKETS) if name == "all" else p.seconds[name]
            ms = sum(m.seconds[b] for b in BUCKETS) if name == "all" else m.seconds[name]
            a, b = ps * 1e3 / pickle_requests, ms * 1e3 / msgpack_requests
            if name != "all" and max(a, b) < 0.0005:
                continue  # a bucket this process does not use (the scheduler serves no HTTP)
            rows.append([process, name, f"{a:.3f}", f"{b:.3f}", f"{b - a:+.3f}"])
        if p.collector is not None and m.collector is not None:
            a, b = p.collector * 1e3 / pickle_requests, m.collector * 1e3 / msgpack_requests
            rows.append([process, "of which the garbage collector (charged to whatever allocated)",
                         f"{a:.3f}", f"{b:.3f}", f"{b - a:+.3f}"])
        if p.messages and m.messages:
            a, b = p.seconds[WIRE] * 1e6 / p.messages, m.seconds[WIRE] * 1e6 / m.messages
            rows.append([process, f"wire format per message (us; {p.messages:,} / {m.messages:,} messages)",
                         f"{a:.1f}", f"{b:.1f}", f"{b - a:+.1f}"])
    out += (markdown_table if markdown else text_table)(header, rows)
    return "\n".join(out) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reference_tools.bench.profile_accounting",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("pickle_dir", type=Path, help="the pickle server's profiles (<base>/c<level>-pickle)")
    p.add_argument("msgpack_dir", type=Path, help="the msgpack server's profiles (<base>/c<level>-msgpack)")
    p.add_argument("--format", choices=["text", "markdown"], default="text")
    args = p.parse_args(argv)
    try:
        sys.stdout.write(render(args.pickle_dir, args.msgpack_dir, args.format == "markdown"))
    except (FileNotFoundError, ValueError) as exc:
        p.exit(2, f"profile_accounting: error: {exc}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
