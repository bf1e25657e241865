"""No one gets in: wire bytes never reach pickle unless the peer is trusted, and then only
through the allow-list; the allow-list cannot be turned into a memory bomb; and the only
unpickling sinks in the reference are the known ones.

tests/test_codec.py already proves the codec-level refusals (untrusted PickleWrapper never
reaches pickle; the allow-list refuses open/os.mkdir/os.system and its bypasses). Here:
the same shell-command pickle over real ZeroMQ sockets, through zmq_io's default receive
path and the engine's own (trusted) receive path; memory bombs built from allow-listed
constructors; and an audit of every unpickling call site.
"""

from __future__ import annotations

import ast
import json
import os
import pickle
import shlex
import subprocess
import sys
from array import array
from pathlib import Path

import pytest
import zmq

from reference_impl import codec, zmq_io
from reference_impl.errors import WireError
from reference_impl.io_struct import (
    BatchTokenizedGenerateReqInput,
    PickleWrapper,
    SamplingParams,
    TokenizedGenerateReqInput,
)

pytestmark = pytest.mark.reliability
ROOT = Path(__file__).resolve().parents[2]


class _Shell:
    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (os.system, ("touch " + shlex.quote(self.path),))


def _request(**fields) -> TokenizedGenerateReqInput:
    base = dict(rid="r", input_text="x", input_ids=array("q", [1]), input_embeds=None, mm_inputs=None,
                token_type_ids=None, sampling_params=SamplingParams(max_new_tokens=1), return_logprob=False,
                logprob_start_len=-1, top_logprobs_num=0, token_ids_logprob=None, stream=False)
    base.update(fields)
    return TokenizedGenerateReqInput(**base)


def _evil_messages(marker: Path) -> dict[str, object]:
    evil = PickleWrapper(pickle.dumps(_Shell(marker)))
    return {"top-level": evil, "field": _request(time_stats=evil),
            "nested in a batch": BatchTokenizedGenerateReqInput(batch=[_request(), _request(rid="s", time_stats=evil)])}


@pytest.fixture
def sockets(tmp_path_factory):
    ipc = tmp_path_factory.mktemp("sec")
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    pull.setsockopt(zmq.RCVTIMEO, 5000)
    endpoint = f"ipc://{ipc}/s"
    pull.bind(endpoint)
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    push.connect(endpoint)
    try:
        yield ctx, endpoint, push, pull
    finally:
        push.close()
        pull.close()
        ctx.term()


def test_control_the_payload_really_runs_a_command(tmp_path):
    marker = tmp_path / "control"
    pickle.loads(pickle.dumps(_Shell(marker)))  # what an unsafe receive path would do
    assert marker.exists()


@pytest.mark.parametrize("where", ["top-level", "field", "nested in a batch"])
def test_default_socket_receive_refuses_a_shell_command_pickle(where, sockets, tmp_path):
    ctx, endpoint, push, pull = sockets
    marker = tmp_path / "pwned"
    push.send(codec.encode(_evil_messages(marker)[where], "msgpack"))
    with pytest.raises(WireError, match="not trusted") as info:
        zmq_io.recv(pull, "msgpack")  # allow_pickle defaults to False: an untrusted peer
    assert str(info.value).startswith("msgpack decode")
    assert not marker.exists()


@pytest.mark.parametrize("where", ["top-level", "field", "nested in a batch"])
def test_engine_receive_path_refuses_it_through_the_allow_list(where, sockets, tmp_path):
    """Inside the engine peers are trusted (same user, private socket directory), so wrappers are
    opened - but only through the allow-listed unpickler: the command never runs."""
    from reference_impl.engine.ipc import Receiver
    from reference_impl.engine.tap import Tap

    ctx, endpoint, push, pull = sockets
    engine_endpoint = endpoint[:-len("/s")] + "/engine"
    receiver = Receiver(ctx, engine_endpoint, link="test", transport="msgpack", tap=Tap(None, "t"))
    sender = ctx.socket(zmq.PUSH)
    sender.setsockopt(zmq.LINGER, 0)
    sender.connect(engine_endpoint)
    marker = tmp_path / "pwned"
    try:
        sender.send(codec.encode(_evil_messages(marker)[where], "msgpack"))
        with pytest.raises(WireError, match="allow-list"):
            receiver.recv(timeout_ms=5000)
    finally:
        sender.close()
        receiver.close()
    assert not marker.exists()


# -- memory bombs from allow-listed constructors (trusted peers) ------------------------------
def _call(module: str, name: str, *args: bytes) -> bytes:
    """Protocol-4 pickle opcodes calling module.name(*args); args are raw pickled values."""
    def text(s: str) -> bytes:
        return b"\x8c" + bytes([len(s)]) + s.encode()
    return text(module) + text(name) + b"\x93(" + b"".join(args) + b"tR"


def _int(n: int) -> bytes:
    body = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(body)]) + body  # LONG1


BOMB = 1 << 29  # 512 MiB from a ~40-byte message
BOMBS = {
    "bytearray(n)": b"\x80\x04" + _call("builtins", "bytearray", _int(BOMB)) + b".",
    "list(range(n))": b"\x80\x04" + _call("builtins", "list", _call("builtins", "range", _int(BOMB // 8))) + b".",
    "deque(range(n))": b"\x80\x04" + _call("collections", "deque", _call("builtins", "range", _int(BOMB // 8))) + b".",
    # 8 bytes: False, memoized at index 2**25 - the C unpickler sizes its memo table to fit it
    "memo index 2**25": b"\x80\x02\x89r" + (1 << 25).to_bytes(4, "little") + b".",
    # found by the fuzzer: a LONG_BINPUT cut short after a too-short frame
    "truncated memo index after a frame": b"\x80\x05\x95\x06\x00\x00\x00\x00\x00\x00\x00(K\x01r\x0b\x00\x00\x00"
                                          b"r\x0b\x00\x00\x00\x91r\x94.",
}
_BOMB_RUNNER = r"""
import json, resource, sys
from reference_impl import codec
from reference_impl.errors import WireError
from reference_impl.io_struct import PickleWrapper
data = codec.encode(PickleWrapper(bytes.fromhex(sys.argv[1])), "msgpack")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
# A cap, so a bomb that goes off fails this child, not the machine.
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (int(open('/proc/self/statm').read().split()[0]) * 4096 + (1 << 30), hard))
try:
    codec.decode(data, "msgpack", allow_pickle=True)
    outcome = "decoded"
except WireError as exc:
    outcome = "WireError: " + str(exc)[:200]
except BaseException as exc:
    outcome = type(exc).__name__ + ": " + str(exc)[:200]
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
print(json.dumps({"outcome": outcome, "grown": grown, "message_bytes": len(data)}))
"""


@pytest.mark.parametrize("bomb", list(BOMBS))
def test_allow_listed_constructors_cannot_be_turned_into_memory_bombs(bomb):
    payload = BOMBS[bomb]
    assert len(payload) < 64
    proc = subprocess.run([sys.executable, "-c", _BOMB_RUNNER, payload.hex()], capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout, proc.stderr[-2000:]
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["outcome"].startswith("WireError"), result
    # A MemoryError means the bomb went off and only this child's address-space cap stopped it.
    assert "MemoryError" not in result["outcome"] and "returned NULL" not in result["outcome"], result
    assert result["grown"] < 64 << 20, (f"a {result['message_bytes']}-byte message made the trusted receive path "
                                        f"allocate {result['grown'] / 2**20:.0f} MiB: {result['outcome']}")


# -- audit: where can wire bytes meet an unpickler? ----------------------------------------------
KNOWN_SINKS = {
    # (file, function): why it is allowed
    ("reference_impl/codec.py", "decode"): "the pickle transport: trusted peers only, by definition (SPEC §11)",
    ("reference_impl/pickle_wrapper.py", "unwrap_value"): "AllowListUnpickler: trusted peers, allow-listed globals",
    ("reference_impl/testee.py", "_decode"): "the testee's pickle transport: its peer is the runner that started it",
    ("reference_impl/testee.py", "<lambda>"): "--break unsafe-receive: the deliberate RCE sink the suite must flag",
    ("reference_impl/_codec_plan.py", "_written_checks"):
        "exec of two functions written from a message type's own field names, as dataclasses does; no wire byte",
}
SINK_CALLS = {("pickle", "loads"), ("pickle", "load"), ("pickle", "Unpickler"), ("marshal", "loads"),
              ("dill", "loads"), ("dill", "load"), ("torch", "load"), ("yaml", "load"), ("yaml", "unsafe_load"),
              ("builtins", "eval"), ("builtins", "exec")}


def _sinks(path: Path) -> set[tuple[str, str]]:
    tree = ast.parse(path.read_text(), str(path))
    found: set[tuple[str, str]] = set()

    class Visitor(ast.NodeVisitor):
        def __init__(self) -> None:
            self.scope = ["<module>"]

        def _scoped(self, node, name: str) -> None:
            self.scope.append(name)
            self.generic_visit(node)
            self.scope.pop()

        def visit_FunctionDef(self, node) -> None:
            self._scoped(node, node.name)

        visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815 - ast.NodeVisitor's method name

        def visit_Lambda(self, node) -> None:
            self._scoped(node, "<lambda>")

        def visit_Call(self, node) -> None:
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                key = (func.value.id, func.attr)
            elif isinstance(func, ast.Name):
                key = ("builtins", func.id)
            else:
                key = None
            if key in SINK_CALLS or (isinstance(func, ast.Attribute) and func.attr == "load"
                                     and isinstance(func.value, ast.Call)
                                     and "Unpickler" in ast.unparse(func.value.func)):
                found.add((str(path.relative_to(ROOT)), self.scope[-1]))
            self.generic_visit(node)

        def visit_ClassDef(self, node) -> None:
            for base in node.bases:
                if "Unpickler" in ast.unparse(base):
                    found.add((str(path.relative_to(ROOT)), f"class {node.name}"))
            self._scoped(node, node.name)

    Visitor().visit(tree)
    return found


def test_every_unpickling_sink_in_the_reference_is_a_known_one():
    found: set[tuple[str, str]] = set()
    for path in sorted((ROOT / "reference_impl").rglob("*.py")):
        found |= _sinks(path)
    found.discard(("reference_impl/pickle_wrapper.py", "class AllowListUnpickler"))  # defined, used in unwrap_value
    unknown = found - set(KNOWN_SINKS)
    assert not unknown, f"new call sites that can unpickle/evaluate wire bytes: {sorted(unknown)}"
    assert found == set(KNOWN_SINKS), f"known sinks no longer present (update KNOWN_SINKS): {set(KNOWN_SINKS) - found}"


def test_no_zeromq_endpoint_outside_a_private_directory_or_loopback():
    """Audit: ZeroMQ endpoints in the reference and the suite are ipc:// (in 0700 directories:
    IpcNames, tempfile) - never tcp:// on a routable address, never a wildcard."""
    import re

    offenders = []
    for root in ("reference_impl", "conformance"):
        for path in sorted((ROOT / root).rglob("*.py")):
            for no, line in enumerate(path.read_text().splitlines(), 1):
                for endpoint in re.findall(r"""(?:tcp|udp|pgm|epgm|ws|wss)://[^"'\s]*""", line):
                    if not re.match(r"tcp://(127\.0\.0\.1|localhost|\[::1\])[:/]", endpoint):
                        offenders.append(f"{path.relative_to(ROOT)}:{no}: {endpoint}")
    assert offenders == [], offenders
    from reference_impl.engine.config import IpcNames

    names = IpcNames.create(2)
    try:
        import stat as st

        assert st.S_IMODE(os.stat(names.ipc_dir).st_mode) == 0o700
        for endpoint in (names.tokenizer_manager, names.controller, names.detokenizer, *names.schedulers):
            assert endpoint.startswith(f"ipc://{names.ipc_dir}/"), endpoint
    finally:
        os.rmdir(names.ipc_dir)
