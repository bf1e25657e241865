"""Fuzz targets: one function per decode entry point, each with its oracle.

A target takes bytes and returns None when the entry point behaved. It raises:

* ``Finding`` - the entry point broke a promise (a refusal that is not the documented
  error type or does not name the transport; a decoded value that cannot be re-encoded,
  or re-encodes to bytes that decode differently; a tripwired function was called);
* whatever else escaped the entry point (that is the crash itself).

The targets do not depend on atheris: ``Reader`` splits the input into choices (which
struct, which ext code, ...) so the same target runs under atheris, under the random
engine and from hypothesis tests.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import msgspec

from reference_tools.fuzz import corpus

_enc = msgspec.msgpack.encode


class Finding(AssertionError):
    """An oracle violation (not a plain crash: the entry point returned, but wrongly)."""


class Reader:
    """Turns fuzzer bytes into choices; past the end it returns zeros / empty bytes."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def int(self, nbytes: int, signed: bool = False) -> int:
        raw = self.take(nbytes).ljust(nbytes, b"\0")
        return int.from_bytes(raw, "little", signed=signed)

    def choice(self, options: list) -> Any:
        return options[self.byte() % len(options)]

    def take(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        self.pos += len(out)
        return out

    def rest(self) -> bytes:
        return self.take(len(self.data) - self.pos)


# -- tripwires: if hostile bytes ever reach these, the fuzzer must know -----------------------
class Tripwire(Finding):
    pass


TRIPPED: list[str] = []  # calls recorded while the tripwires were armed (an unpickler may swallow the raise)
_WIRES = (("os", ("system", "popen", "execv", "execve", "execl", "execvp", "spawnv", "fork", "remove", "unlink",
                  "rmdir", "kill", "putenv")),
          ("posix", ("system", "execv", "execve", "fork", "remove", "unlink", "rmdir", "kill", "putenv")),
          ("subprocess", ("Popen", "run", "call", "check_call", "check_output", "getoutput")),
          ("builtins", ("eval", "exec", "breakpoint", "input")),
          ("shutil", ("rmtree",)))


# Callers that use these functions for their own ends while a message decodes: typing
# evaluates string annotations, imports exec module code, dataclasses and the codec's plans
# (reference_impl/_codec_plan.py, the first time a message type is met) exec functions written
# from a class's own field names. Any other caller - above all the frame that called
# pickle.load(s) (C pickle calls the global it loaded straight from there) - trips the wire.
_OWN_USE = ("/typing.py", "/dataclasses.py", "<frozen importlib._bootstrap>",
            "<frozen importlib._bootstrap_external>", "/importlib/__init__.py", "/reference_impl/_codec_plan.py")


def _called_by_unpickling(frame: Any) -> bool:
    filename = frame.f_code.co_filename.replace(os.sep, "/")
    return not filename.endswith(_OWN_USE)


def _import_lazy_dependencies() -> None:
    """The reference codec imports torch at the first tensor it meets; torch's own module code
    (namedtuples built through eval) would otherwise run under the wires as if hostile bytes had
    reached eval. A receiving engine process has torch imported long before its first message."""
    try:
        import torch  # noqa: F401 - imported for its side effect: loaded before the wires are armed
    except ImportError:  # the lean install: no tensor can be made, so none is met
        pass


@contextmanager
def tripwires() -> Iterator[None]:
    """While armed, the usual command-execution entry points record the call and raise instead
    of running; on exit they are restored and any recorded call is a Finding."""
    _import_lazy_dependencies()
    saved = []
    for module_name, names in _WIRES:
        owner = sys.modules.get(module_name) or __import__(module_name)
        for name in names:
            if hasattr(owner, name):
                saved.append((owner, name, getattr(owner, name)))

                def tripped(*args: Any, _where: str = f"{module_name}.{name}", _original: Any = getattr(owner, name),  # noqa: B008 - binds this loop's original
                            **kwargs: Any) -> Any:
                    if not _called_by_unpickling(sys._getframe(1)):
                        return _original(*args, **kwargs)  # the interpreter's own use (typing's eval, ...)
                    TRIPPED.append(f"{_where}{args!r:.200}")
                    raise Tripwire(f"{_where} was called with {args!r:.200}")

                setattr(owner, name, tripped)
    TRIPPED.clear()
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
        if TRIPPED:
            calls = list(TRIPPED)
            TRIPPED.clear()
            raise Tripwire(f"hostile bytes reached {calls}")


# -- oracles ----------------------------------------------------------------------------------
def _check_wire_error(exc: BaseException, transport: str = "msgpack") -> None:
    from reference_impl.errors import WireError

    if not isinstance(exc, WireError):
        raise exc
    if exc.transport != transport or exc.direction != "decode" or not str(exc).startswith(f"{transport} decode"):
        raise Finding(f"a WireError that does not name the transport and direction: {exc!r}")
    if not exc.reason:
        raise Finding(f"a WireError without a reason: {exc!r}")


def _check_round_trip(obj: Any, trusted: bool) -> None:
    """A decoded message re-encodes, and its bytes are a fixed point of decode -> encode."""
    from reference_impl import codec
    from reference_impl.errors import WireError

    try:
        once = codec.encode(obj, "msgpack")
    except WireError as exc:
        raise Finding(f"decoded a {type(obj).__name__} that does not re-encode: {exc}") from None
    try:
        again = codec.decode(once, "msgpack", allow_pickle=trusted)
    except WireError as exc:
        raise Finding(f"re-encoded bytes of a decoded {type(obj).__name__} do not decode: {exc}") from None
    twice = codec.encode(again, "msgpack")
    if twice != once:
        raise Finding(f"{type(obj).__name__}: decode(encode(x)) re-encodes differently "
                      f"({len(once)} vs {len(twice)} bytes)")


def _decode(data: bytes, *, trusted: bool = False, round_trip: bool = True) -> Optional[Any]:
    from reference_impl import codec

    try:
        obj = codec.decode(data, "msgpack", allow_pickle=trusted)
    except Exception as exc:  # noqa: BLE001 - the oracle decides
        _check_wire_error(exc)
        return None
    if round_trip:
        _check_round_trip(obj, trusted)
    return obj


# -- the targets ------------------------------------------------------------------------------
def decode(data: bytes) -> None:
    """codec.decode for an untrusted peer: the top-level union (every struct + primitives)."""
    with tripwires():
        _decode(data)


def decode_trusted(data: bytes) -> None:
    """codec.decode for a trusted peer: PickleWrappers opened through the allow-listed unpickler."""
    with tripwires():
        _decode(data, trusted=True)


def struct_fields(data: bytes) -> None:
    """One struct of the catalogue (chosen by the first byte), its fields from the rest:
    [tag, field...] so the fuzzer explores every struct's field types, not just the tags."""
    from reference_impl import codec

    r = Reader(data)
    types = sorted(codec.message_types(), key=lambda t: t.__name__)
    cls = types[r.int(2) % len(types)]
    tag = cls.__struct_config__.tag
    count = r.byte() % (len(cls.__struct_fields__) + 3)  # too few, exact and too many fields
    head = (bytes([0x90 | (count + 1)]) if count < 15 else b"\xdc" + (count + 1).to_bytes(2, "big"))
    _decode(head + _enc(tag) + r.rest())


_DTYPES = ["float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool", "complex64",
           "float8_e4m3fn", "float8_e5m2", "qint8", "quint8", "qint32", "quint4x2", "bits8", "uint1", "int4",
           "float4_e2m1fn_x2", "complex32", "Tensor", "", "float", "half", "cfloat", "<f4", "|O", "<U1", "V0", "M8"]
_DEVICES = ["cpu", "cuda", "cuda:0", "meta", "mps", "xla", "hpu", "privateuseone", "lazy", "", "cpu:0", "cuda:-1"]


def _fuzzed_metadata(r: Reader, code: int) -> Any:
    mode = r.byte() % 4
    if mode == 0:  # raw bytes as metadata
        return msgspec.Raw(r.take(r.byte()))
    shape = [r.int(8, signed=True) if r.byte() % 4 == 0 else r.byte() % 5 for _ in range(r.byte() % 6)]
    dtype = r.choice(_DTYPES) if mode != 3 else r.take(r.byte() % 12).decode("latin-1")
    if code == 1:
        return r.choice(["q", "i", "b", "B", "d", "f", "u", "w", "Z", ""])
    if code == 3:
        return [shape, dtype]
    meta = [shape, dtype, r.choice(_DEVICES)]
    if code == 64:
        meta.append(r.int(1, signed=True))
    return meta


def ext_payloads(data: bytes) -> None:
    """Buffer extension payloads (codes 1-5, 64, others) with structured or raw metadata,
    placed in an Any field, a typed tensor field, an ndarray field or the List[array]
    token ids (long lists take the codec's fast path)."""
    r = Reader(data)
    code = r.choice([1, 2, 3, 4, 5, 64, 2, 3, 1, r.byte()])
    meta = _fuzzed_metadata(r, code)
    meta_bytes = meta if isinstance(meta, msgspec.Raw) else msgspec.Raw(_enc(meta))
    declared = len(bytes(meta_bytes)) if r.byte() % 4 else r.int(4)
    raw = r.take(r.byte() if r.byte() % 2 else r.int(2) % 4096)
    payload = struct.pack(">I", declared % (1 << 32)) + bytes(meta_bytes) + raw
    value = msgspec.msgpack.Ext(code % 128, payload)
    where = r.byte() % 4
    if where == 0:
        message = corpus.in_any(value)
    elif where == 1:
        message = corpus.in_tensor_field(value)
    elif where == 2:
        message = corpus.token_output_with("input_top_logprobs_val_flat", [value])
    else:
        good = corpus.buffer_ext(1, "q", b"\1" * 8)
        items = [good] * (r.byte() % 48) + [value] + [good] * (r.byte() % 8)
        message = corpus.token_output_with("decode_ids", items)
    _decode(message)


def frames(data: bytes) -> None:
    """codec.decode_frames: a head message and out-of-band buffers (the zero-copy path)."""
    from reference_impl import codec

    r = Reader(data)
    n = 1 + r.byte() % 4
    parts = []
    for _ in range(n - 1):
        parts.append(r.take(r.int(2) % 512))
    parts.insert(0, r.rest())
    try:
        obj = codec.decode_frames(parts, "msgpack")
    except Exception as exc:  # noqa: BLE001 - judged next: only a WireError is a refusal
        _check_wire_error(exc)
        return
    _check_round_trip(obj, trusted=False)


def pickle_wrapper(data: bytes) -> None:
    """A trusted PickleWrapper's bytes through the allow-listed unpickler: a value or a
    WireError, and none of the tripwired functions ever called."""
    from reference_impl.errors import WireError
    from reference_impl.io_struct import PickleWrapper
    from reference_impl.pickle_wrapper import unwrap_value

    with tripwires():
        try:
            unwrap_value(PickleWrapper(data), allow_pickle=True, transport="msgpack", where=("PickleWrapper", ""))
        except WireError as exc:
            _check_wire_error(exc)
    # (an untrusted unwrap never reaches pickle at all: the decode targets check that)


def testee_frames(data: bytes) -> None:
    """The runner's side of the testee protocol: frames read from a (hostile) testee's stdout
    are a dict, a clean end of stream, or ProtocolError - nothing else, no hang."""
    from conformance.testee import protocol

    stream = io.BytesIO(data)
    for request_id in range(64):
        try:
            message = protocol.read_frame(stream)
        except protocol.ProtocolError:
            return
        if message is None:
            return
        for check in (protocol.check_started, lambda m, rid=request_id: protocol.check_result(m, rid)):
            try:
                check(message)
            except protocol.ProtocolError:
                pass


def testee_requests(data: bytes) -> None:
    """The reference testee's side: requests from stdin must be answered (a result frame with
    a documented result kind) or end the conversation cleanly - the testee must not crash."""
    from reference_impl import testee

    stream = io.BytesIO(data)
    t = testee.Testee(set())
    for _ in range(16):
        try:
            request = testee.read_message(stream)
        except testee.ParseError:  # answered with parse_error; the stream stays in step
            continue
        except Exception as exc:  # noqa: BLE001 - anything else kills the testee
            raise Finding(f"the testee crashes on a request frame: {type(exc).__name__}: {exc}") from None
        if request is None:
            return
        answer = t.handle(request)
        kind = answer.get("result", answer.get("type"))
        if kind not in ("payload", "parse_error", "serialize_error", "runtime_error", "skipped", "started", "stopped"):
            raise Finding(f"the testee answered {answer!r:.200}")


@dataclass(frozen=True)
class Target:
    name: str
    fn: Callable[[bytes], None]
    seeds: Callable[[], list[bytes]]
    known: str = ""  # a known, reported finding this target still hits (see docs/reliability.md)

    @property
    def doc(self) -> str:
        return (self.fn.__doc__ or "").strip().splitlines()[0]


def _golden_and_hostile() -> list[bytes]:
    return [d for _, d in corpus.golden_seeds()] + [c.data for c in corpus.cases() if len(c.data) < 1 << 16]


def _struct_seeds() -> list[bytes]:
    from reference_impl import codec

    types = sorted(codec.message_types(), key=lambda t: t.__name__)
    index = {t.__struct_config__.tag: i for i, t in enumerate(types)}
    out = []
    for name, data in corpus.golden_seeds():
        tag = name.split(".")[0]
        if tag in index:  # the fields of the golden vector after [index, count]
            items = msgspec.msgpack.decode(data, type=list[msgspec.Raw])
            body = b"".join(bytes(x) for x in items[1:])
            out.append(index[tag].to_bytes(2, "little") + bytes([len(items) - 1]) + body)
    return out


def _ext_seeds() -> list[bytes]:
    return [bytes([i, j, k]) + os.urandom(24) for i in range(6) for j in range(4) for k in range(4)]


def _frame_seeds() -> list[bytes]:
    import torch

    from reference_impl import codec
    from reference_impl.io_struct import BatchEmbeddingOutput

    msg = BatchEmbeddingOutput(rids=["r"], finished_reasons=[None], embeddings=[[0.0]], prompt_tokens=[1],
                               cached_tokens=[0], placeholder_tokens_idx=None, placeholder_tokens_val=None,
                               pooled_hidden_states=[torch.arange(64, dtype=torch.float32)])
    head, *bufs = codec.encode_frames(msg, "msgpack", threshold=16)
    seed = bytes([1 + len(bufs)]) + b"".join(len(b).to_bytes(2, "little") + bytes(b) for b in bufs) + head
    return [seed, bytes([0]) + corpus.golden("AbortReq.typical")]


def _pickle_seeds() -> list[bytes]:
    import collections
    import datetime

    values = [{"a": (1, 2)}, {1, 2}, collections.OrderedDict(a=1), datetime.datetime(2020, 1, 1), b"x" * 10,
              [1.5, None, "s"], frozenset({1})]
    return [pickle.dumps(v, protocol=p) for v in values for p in (2, 5)] + [corpus._evil_pickle()]


def _testee_seeds() -> list[bytes]:
    from conformance.testee import protocol

    started = {"type": "started", "protocol": 1, "implementation": {"name": "x", "version": "1"},
               "manifest": "m", "transports": ["msgpack"], "ops": ["decode", "encode"]}
    return [protocol.pack({"type": "start", "protocol": 1}),
            # the known findings, pinned so a short run always replays them (see Target.known)
            protocol.pack({**started, "transports": [["msgpack"]]}),
            struct.pack("<I", 1) + b"\xc1",
            protocol.pack({"type": "decode", "id": 1, "transport": "msgpack",
                           "payload": corpus.golden("AbortReq.typical")}),
            protocol.pack({"type": "started", "protocol": 1, "implementation": {"name": "x", "version": "1"},
                           "manifest": "m", "transports": ["msgpack"], "ops": ["decode", "encode"]}),
            protocol.pack({"id": 0, "result": "payload", "payload": b"\x90"})]


TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("decode", decode, _golden_and_hostile),
    Target("decode_trusted", decode_trusted, _golden_and_hostile),
    Target("struct_fields", struct_fields, _struct_seeds),
    Target("ext_payloads", ext_payloads, _ext_seeds),
    Target("frames", frames, _frame_seeds),
    Target("pickle_wrapper", pickle_wrapper, _pickle_seeds),
    Target("testee_frames", testee_frames, _testee_seeds),
    Target("testee_requests", testee_requests, _testee_seeds),
)}


def run_one(name: str, data: bytes) -> Optional[str]:
    """Run a target on one input in this process: None, or the failure as text."""
    import traceback

    try:
        TARGETS[name].fn(data)
    except Exception as exc:  # noqa: BLE001 - any exception a target lets out is a finding
        return "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return None


if __name__ == "__main__":  # python -m reference_tools.fuzz.targets TARGET FILE: replay one input
    print(run_one(sys.argv[1], open(sys.argv[2], "rb").read()) or "ok")
