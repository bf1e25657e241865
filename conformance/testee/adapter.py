"""SubprocessAdapter: an implementation in any language, driven over the testee protocol.

`load_adapter("cmd:<command line>")` starts the command once per run, performs the
start handshake and maps every Adapter method onto requests (spec/testee.md):

    encode(obj, t)        -> `encode` with the JSON view of obj; the answer is the wire bytes
    decode(data, t)       -> `decode`: the testee decodes and re-encodes; the runner decodes
                             that answer with the reference codec to compare values
    decoded_view(data, t) -> `decode`, judged on the JSON view of the decoded value that a
                             protocol-2 answer carries (checks of what a re-encode hides)
    wrap(obj)             -> obj (the testee's `encode` is its sender path: it wraps)
    unwrap(obj)           -> `unwrap` (optional op; Python testees), answered as pickle
    receive(data, t)      -> `receive` (optional op), the untrusted receive path
    validate_http(s, j)   -> `http` (optional op)

A testee is checked against the manifest it claims in the handshake: classes,
live_manifest and message_types come from that bundled manifest (the reference structs
for the reference's manifest, codegen'd ones otherwise), so the Catalogue checks hold
by construction and the wire checks decide.
"""

from __future__ import annotations

import atexit
import collections
import hashlib
import json
import os
import pickle
import queue
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import Any, Mapping, Optional, Sequence, Union

import msgspec
import pytest

from conformance.adapters.base import Adapter
from conformance.errors import UsageError
from conformance.schema.golden.catalogue import Catalogue, catalogue_for
from conformance.schema.golden.view import ViewError, dumps, to_view
from conformance.schema.manifest import Manifest, load_manifest
from conformance.testee import protocol
from conformance.testee.replay import STEPS, describe_request, reproducer

__all__ = ["SubprocessAdapter", "TesteeAnswerError", "TesteeError", "TesteeRuntimeError", "TesteeSkipped"]

DEFAULT_TIMEOUT = float(os.environ.get("IPC_TESTEE_TIMEOUT", "60"))


class TesteeError(ValueError):
    """The testee answered parse_error or serialize_error (it refused the input)."""

    __test__ = False  # not a pytest class, whatever its name

    def __init__(self, kind: str, message: str, context: str = "") -> None:
        self.kind = kind
        super().__init__(f"testee {kind}: {message}{context}")


class TesteeAnswerError(AssertionError):
    """The testee answered `payload`, but the reference cannot decode those bytes: the check
    fails (it is not a refusal by the testee)."""

    __test__ = False


class TesteeRuntimeError(RuntimeError):
    """The testee answered runtime_error, crashed, hung, or broke the protocol."""

    __test__ = False


class TesteeSkipped(pytest.skip.Exception):  # type: ignore[misc, name-defined]
    """The testee (or the protocol) cannot run this check: it is skipped, not failed."""

    __test__ = False

    def __init__(self, message: str) -> None:
        super().__init__(msg=message)


def command_argv(command: Union[str, Sequence[str]]) -> list[str]:
    """Split a command line; a bare `python`/`python3` means this interpreter, so
    `cmd:python -m reference_impl.testee` works outside an activated venv."""
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise ValueError("empty testee command")
    if argv[0] in ("python", "python3") and shutil.which(argv[0]) != sys.executable:
        argv[0] = sys.executable
    return argv


class _Process:
    """One running testee: framed requests on stdin, a reader thread on stdout."""

    def __init__(self, argv: list[str], timeout: float) -> None:
        self.timeout = timeout
        self.log = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                         env=_testee_environment())
        except OSError as exc:
            raise TesteeRuntimeError(f"cannot start testee {shlex.join(argv)}: {exc}") from None
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both are pipes
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.answers: "queue.Queue[Any]" = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        frames = 0
        try:
            while True:
                message = protocol.read_frame(self.stdout, frames_before=frames)
                frames += 1
                self.answers.put(message)
                if message is None:
                    return
        except Exception as exc:  # noqa: BLE001 - a protocol error of any kind ends the conversation
            self.answers.put(exc)

    def ask(self, message: dict[str, Any], timeout: Optional[float] = None) -> dict[str, Any]:
        try:
            protocol.write_frame(self.stdin, message)
        except (BrokenPipeError, OSError, ValueError):
            raise TesteeRuntimeError(f"testee exited (status {self.proc.poll()}){self.stderr_tail()}") from None
        try:
            answer = self.answers.get(timeout=timeout or self.timeout)
        except queue.Empty:
            raise TesteeRuntimeError(f"testee gave no answer to {message.get('type')!r} within "
                                     f"{timeout or self.timeout:.0f} s{self.stderr_tail()}") from None
        if answer is None:
            self.proc.wait(timeout=5)
            raise TesteeRuntimeError(f"testee closed its stdout (exit status {self.proc.returncode})"
                                     f"{self.stderr_tail()}")
        if isinstance(answer, Exception):
            raise TesteeRuntimeError(f"{answer}{self.stderr_tail()}")
        frame: dict[str, Any] = answer
        return frame

    def stderr_tail(self, lines: int = 12) -> str:
        try:
            self.log.seek(0)
            text = self.log.read().decode("utf-8", "replace").strip().splitlines()[-lines:]
        except (OSError, ValueError):
            return ""
        return ("\n  testee stderr:\n    " + "\n    ".join(text)) if text else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                protocol.check_stopped(self.ask({"type": "stop"}, timeout=5))
                self.proc.wait(timeout=5)
            except (TesteeRuntimeError, protocol.ProtocolError, subprocess.TimeoutExpired):
                self.kill()
        for stream in (self.stdin, self.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self.log.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class SubprocessAdapter(Adapter):
    def __init__(self, command: Union[str, Sequence[str]], *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.argv = command_argv(command)
        self.timeout = timeout
        self.restarts = 0
        self._next_id = 0
        self._process: Optional[_Process] = None
        self._defined: set[str] = set()
        #: the last requests sent, for reproducers of failures found after the answers arrived
        self.recent: "collections.deque[dict[str, Any]]" = collections.deque(maxlen=4)
        #: digests of the testee's recent encode answers: a failure to decode them is named a
        #: decode of its own encode output, not of bytes the runner wrote
        self._encoded: "collections.OrderedDict[bytes, None]" = collections.OrderedDict()
        self.hello = self._start()
        impl = self.hello["implementation"]
        self.name = impl["name"]
        self.version = impl["version"]
        self.language = str(impl.get("language", "?"))
        self.transports = tuple(t for t in ("pickle", "msgpack") if t in self.hello.get("transports", ["msgpack"]))
        self.ops = frozenset(self.hello.get("ops", protocol.REQUIRED_OPS))
        self.capabilities = protocol.capabilities(self.ops)
        #: the protocol version the testee answered (1 or 2): protocol 2 decodes report a view
        self.protocol = int(self.hello["protocol"])
        #: how it holds tensors ("runtime", "values"), or None: a protocol-1 testee does not say
        self.tensor_kind: Optional[str] = self.hello.get("tensors")
        self._last_answer: dict[str, Any] = {}
        self.spec_version = protocol.spec_version(self.hello)
        try:
            self.manifest: Manifest = load_manifest(self.hello["manifest"])
        except UsageError as exc:
            self.close()
            raise TesteeRuntimeError(f"the testee claims manifest {self.hello['manifest']!r}: {exc}") from None
        #: the claimed manifest's reference classes and codec: what judges the testee's bytes
        self._reference: Catalogue = catalogue_for(self.manifest)
        atexit.register(self.close)

    # -- process -------------------------------------------------------------------
    def _start(self) -> dict[str, Any]:
        self._process = _Process(self.argv, self.timeout)
        try:
            hello = protocol.check_started(self._process.ask({"type": "start", "protocol": protocol.PROTOCOL}))
        except (TesteeRuntimeError, protocol.ProtocolError) as exc:
            self._process.kill()
            self._process = None
            raise TesteeRuntimeError(f"testee {shlex.join(self.argv)} failed the start handshake: {exc}") from None
        self._defined = set()
        return hello

    def close(self) -> None:
        if self._process is not None:
            self._process.stop()
            self._process = None

    def exchange(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one request (it gets the next id) and return the testee's checked answer.
        A testee that died during an earlier request is started afresh first."""
        if self._process is None:
            self.restarts += 1
            hello = self._start()
            if hello["manifest"] != self.manifest.id:
                raise TesteeRuntimeError("the restarted testee claims another manifest")
        process = self._process
        assert process is not None  # started above
        self._next_id += 1
        request_id = self._next_id
        try:
            return protocol.check_result(process.ask({**request, "id": request_id}), request_id)
        except (TesteeRuntimeError, protocol.ProtocolError) as exc:
            process.kill()
            self._process = None
            raise TesteeRuntimeError(str(exc)) from None

    def _request(self, op: str, step: Optional[str] = None, **fields: Any) -> bytes:
        if op not in self.ops:
            # the checks skip up front (suite/capability.py); this guards direct callers
            raise TesteeSkipped(f"{self.label} does not offer '{op}': its handshake lists no such op")
        request = {"type": op, **fields}
        self.recent.append(request)
        try:
            answer = self.exchange(request)
        except TesteeRuntimeError as exc:
            raise TesteeRuntimeError(f"{exc}{self._context(request, step)}") from None
        kind = answer["result"]
        self._last_answer = answer
        if kind == "payload":
            payload = bytes(answer["payload"])
            if op == "encode":
                self._remember_encoded(payload)
            return payload
        message = str(answer.get("message", ""))
        if kind == "skipped":
            raise TesteeSkipped(f"testee skipped '{op}': {message}")
        if kind == "runtime_error":
            raise TesteeRuntimeError(f"testee runtime_error: {message}{self._context(request, step)}")
        raise TesteeError(kind, message, self._context(request, step))

    def _remember_encoded(self, payload: bytes) -> None:
        self._encoded[hashlib.sha256(payload).digest()] = None
        while len(self._encoded) > 16:
            self._encoded.popitem(last=False)

    def _input_step(self, op: str, data: Any, transport: str = "msgpack") -> Optional[str]:
        """The step of a decode or receive request whose bytes the testee itself encoded."""
        if hashlib.sha256(bytes(data)).digest() not in self._encoded:
            return None
        step = {"decode": "the testee's decode (and re-encode) of its own encode output (the runner sent its "
                          "bytes back unchanged)",
                "receive": "the testee's receive path for an untrusted peer, on its own encode output (the runner "
                           "sent its bytes back unchanged)"}[op]
        return f"{step}; {self._suspect(bytes(data))}" if transport == "msgpack" else step

    def _suspect(self, data: bytes) -> str:
        """Which side of a round trip of the testee's own bytes is to blame should it fail: the
        runner's reference decode reads the bytes (its decode is the suspect) or cannot (its encode)."""
        try:
            self._reference.decode(data)
        except Exception as exc:  # noqa: BLE001 - what the reference says about the bytes is the evidence
            return (f"the runner's reference decode cannot read these bytes either ({type(exc).__name__}: "
                    f"{str(exc).splitlines()[0][:160] if str(exc) else ''}): the testee's encode is the suspect")
        return "the runner's reference decode reads these bytes: should this fail, the testee's decode is the suspect"

    def start_check(self) -> None:
        """A new check begins: forget the requests and answers of the one before, so that no failure
        message of this check names them (the plugin calls it before each check)."""
        self.recent.clear()
        self._encoded.clear()
        self._last_answer = {}

    def reproducers(self, count: int = 2) -> str:
        """Lines naming the last `count` requests and the commands that replay them: for a check
        that fails on the values it got back (the requests themselves succeeded)."""
        requests = list(self.recent)[-count:]
        return "".join(f"\n  request: {describe_request(r)}\n  reproduce: {reproducer(r, self.argv)}" for r in requests)

    def _context(self, request: dict[str, Any], step: Optional[str] = None) -> str:
        """Where a failure happened, what was asked, and how to ask it again outside the suite."""
        op = str(request.get("type"))
        return (f"\n  step: {step or STEPS.get(op, op)}"
                f"\n  request: {describe_request(request)}"
                f"\n  reproduce: {reproducer(request, self.argv)}")

    # -- catalogue: the claimed manifest ------------------------------------------------
    def classes(self) -> Mapping[str, type]:
        return self._reference.classes

    def live_manifest(self) -> Manifest:
        return self.manifest

    def message_types(self) -> Sequence[type]:
        return [self._reference.classes[n] for n in self.manifest.union if n in self.manifest.structs]

    def manifest_id(self) -> str:
        return self.manifest.id

    # -- wire ------------------------------------------------------------------------
    def local_decode(self, data: bytes, transport: str) -> Any:
        """The reference decode of bytes the testee answered with."""
        if transport == "pickle":
            return _unpickle(data)  # the runner trusts the testee it started
        return self._reference.decode(data)

    def _answer_value(self, payload: bytes, transport: str, request: dict[str, Any]) -> Any:
        try:
            return self.local_decode(payload, transport)
        except Exception as exc:  # noqa: BLE001 - any refusal of the testee's bytes fails the check
            raise TesteeAnswerError(
                f"the reference cannot decode the testee's answer ({len(payload)} bytes {payload[:32].hex(' ')}"
                f"{' ...' if len(payload) > 32 else ''}): {exc}"
                + self._context(request, f"the runner's reference decode of the testee's answer to "
                                         f"'{request['type']}'")) from None

    def _view(self, obj: Any) -> str:
        self._define_late_subclasses(obj)
        try:
            return dumps(to_view(obj))
        except ViewError as exc:
            raise TesteeSkipped(f"not expressible in the testee protocol: {exc}") from None

    def _define_late_subclasses(self, obj: Any) -> None:
        """A struct class the manifest does not know, derived from one it does (a late
        grandchild): ask the testee to define it too (optional 'define' request)."""
        if not isinstance(obj, msgspec.Struct):
            return
        cls = type(obj)
        if cls.__name__ in self.manifest.structs or cls.__name__ in self._defined:
            return
        base = next((b.__name__ for b in cls.__mro__[1:] if b.__name__ in self.manifest.structs), None)
        if base is None:
            raise TesteeSkipped(f"struct {cls.__name__} is not in {self.manifest.id}: the protocol cannot carry it")
        self._request("define", name=cls.__name__, base=base, module=cls.__module__)
        self._defined.add(cls.__name__)

    def encode(self, obj: Any, transport: str) -> bytes:
        struct = type(obj).__name__ if isinstance(obj, msgspec.Struct) else None
        return self._request("encode", transport=transport, struct=struct, view=self._view(obj))

    def encode_view(self, view: Any, struct: Optional[str], transport: str) -> bytes:
        """Encode a JSON view (SPEC §13.3) the runner wrote itself: for values no Python object
        holds, such as a `$dict` with two keys equal under ==."""
        return self._request("encode", transport=transport, struct=struct, view=dumps(view))

    def decode(self, data: bytes, transport: str) -> Any:
        request: dict[str, Any] = dict(transport=transport, struct=_peek_tag(data, transport), payload=bytes(data))
        answer = self._request("decode", self._input_step("decode", data, transport), **request)
        return self._answer_value(answer, transport, {"type": "decode", **request})

    def decoded_view(self, data: bytes, transport: str) -> Any:
        """The testee's own decoded value of `data`, as the JSON view (SPEC §13.3, plain JSON data)
        its `decode` answer carries (protocol 2), not the runner's decode of its re-encode: what
        the re-encode would hide (a default not filled, a key kept) shows here. A protocol-1 testee
        reports no view: the check is skipped, naming the protocol; a protocol-2 answer without
        one fails it."""
        if self.protocol < 2:
            raise TesteeSkipped(f"{self.label} speaks testee protocol {self.protocol}: this check judges the decoded "
                                "value itself, which protocol 2's decode answer carries as 'view' (spec/testee.md)")
        request: dict[str, Any] = dict(transport=transport, struct=_peek_tag(data, transport), payload=bytes(data))
        payload = self._request("decode", **request)
        self._answer_value(payload, transport, {"type": "decode", **request})  # the answer must still decode
        text = self._last_answer.get("view")
        if not isinstance(text, str):
            raise TesteeAnswerError("the testee speaks protocol 2, yet its decode answer carries no 'view'"
                                    + self._context({"type": "decode", **request}))
        try:
            return json.loads(text)
        except ValueError as exc:
            raise TesteeAnswerError(f"the decode answer's 'view' is not JSON: {exc}"
                                    + self._context({"type": "decode", **request})) from None

    def decoded_payload(self, data: bytes, transport: str) -> bytes:
        """The testee's re-encode of `data` as it answered it, unread: for checks that judge the
        bytes themselves (a device string the runner's own decoder cannot hold)."""
        request: dict[str, Any] = dict(transport=transport, struct=_peek_tag(data, transport), payload=bytes(data))
        return self._request("decode", **request)

    def wrap(self, obj: Any) -> Any:
        return obj  # the testee's encode is its whole sender path, wrapping included

    def unwrap(self, obj: Any) -> Any:
        if "unwrap" not in self.ops:
            raise TesteeSkipped(f"{self.label} does not offer 'unwrap': its handshake lists no such op "
                                "(PickleWrapper contents are implementation-private)")
        data = self._reference.encode(obj)
        return _unpickle(self._request("unwrap", transport="msgpack", payload=data))

    def receive(self, data: bytes, transport: str) -> Any:
        request: dict[str, Any] = dict(transport=transport, struct=_peek_tag(data, transport), payload=bytes(data))
        answer = self._request("receive", self._input_step("receive", data, transport), **request)
        return self._answer_value(answer, transport, {"type": "receive", **request})

    def validate_http(self, struct: str, json_text: str) -> Any:
        request: dict[str, Any] = dict(struct=struct, json=json_text)
        return self._answer_value(self._request("http", **request), "msgpack", {"type": "http", **request})

    def send(self, sock: Any, obj: Any, transport: str, *, zero_copy: bool = False) -> None:
        """The testee's bytes, sent whole by the runner. A zero-copy send (a buffer shared
        with the caller while in flight) only exists inside one process: never declared."""
        if zero_copy:
            raise ValueError("a testee offers no zero-copy send (capability 'zero_copy' is not declared)")
        sock.send(self.encode(obj, transport))

    def recv(self, sock: Any, transport: str) -> Any:
        """One message from the socket through the testee's trusted receive path (`unwrap`)."""
        if "unwrap" not in self.ops:
            raise TesteeSkipped(f"{self.label} does not offer 'socket': receiving needs its 'unwrap' op")
        data = sock.recv()
        return _unpickle(self._request("unwrap", transport=transport, payload=bytes(data)))

    @property
    def label(self) -> str:
        return f"{self.name}-{self.version}"


def _testee_environment() -> dict[str, str]:
    """The runner's environment plus where its bundled manifests are (spec/testee.md 2.1)."""
    from conformance.paths import manifests_dir

    return {**os.environ, "IPC_CONFORMANCE_MANIFESTS": str(manifests_dir())}


def _unpickle(data: bytes) -> Any:
    """A testee's pickled answer. Where it holds torch objects (a Python testee's tensors, its
    classes that import torch) and this runner has no torch, the check is not tested, naming the extra."""
    try:
        return pickle.loads(data)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "torch":
            raise
        from conformance.tensors import EXTRA_HINT

        raise TesteeSkipped(f"the testee's pickled answer holds torch objects, and this runner {EXTRA_HINT}") from None


def _peek_tag(data: Any, transport: str) -> Optional[str]:
    if transport != "msgpack":
        return None
    try:
        head = msgspec.msgpack.decode(data, ext_hook=lambda code, raw: None)
    except Exception:  # noqa: BLE001 - only a hint for the request; the testee judges the bytes
        return None
    return head[0] if isinstance(head, list) and head and isinstance(head[0], str) else None


def from_spec(spec: str) -> SubprocessAdapter:
    """'cmd:<command line>' -> a started SubprocessAdapter."""
    return SubprocessAdapter(spec.removeprefix("cmd:"))
