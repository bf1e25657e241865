"""The reference testee: the reference codec behind the testee protocol (spec/testee.md).

    ipc-conformance run --impl "cmd:python -m reference_impl.testee"
    ipc-conformance smoke --impl "cmd:python -m reference_impl.testee --break flip-byte"

It reads length-prefixed msgpack requests on stdin and answers on stdout, and passes
every check the in-process reference passes: that proves the protocol. `--break MODE`
(repeatable) makes it deliberately wrong, to see the matching checks fail:

    flip-byte       every msgpack payload it produces has its last byte flipped
    drop-field      its decoder forgets the last field of each struct (it keeps the default)
    unsafe-receive  the untrusted receive path unpickles PickleWrapper bytes (RCE sink)
    no-unwrap       the trusted receive path hands PickleWrappers on unopened
    crash           it exits in the middle of the first decode request
    bad-frame       it answers decode requests with a truncated frame
    accept-all      its decoder validates nothing: any msgpack comes back re-encoded as it came
    float32         its encoder writes a float as float 32 wherever the value fits
    int-floats      its encoder writes integral floats (0.0, -0.0, 2.0) as msgpack ints
    drop-defaults   its encoder leaves out a message's trailing fields equal to their defaults
    nonfinite-nil   its encoder writes non-finite floats inside lists (-inf logprobs, NaN) as nil
    falsy-wrap-nil  its sender writes nil for a falsy object ({}, [], 0, "") at a PickleWrapper position
    trailing-byte   its encoder writes a nil after each msgpack message (its own decoder refuses it)
    refuse-unknown-map-keys   its decoder refuses a map-encoded struct with a key it does not know
    no-map-defaults its decoder leaves the fields a map-encoded struct omits unset (its view
                    leaves them out; its re-encode hides it, a reader fills the defaults again)
    tuple-any-length          its decoder fits a fixed-size tuple of another length (cut or padded)
    device-to-cpu   its decoder restores every tensor on the CPU, whatever device it names
    http-factory-required     its HTTP bridge refuses JSON that omits a field with a default factory
    http-unknown-keys         its HTTP bridge drops keys it does not know instead of refusing them
    forget-define   it answers `define` but never defines the subclass (its union is fixed at start-up)
    colliding-keys  its encoder writes every key of an `encode` view's `$dict`, even keys equal under ==
                    (`1` and `1.0`), where its reader keeps one
    keep-colliding-keys  its decoder holds a map as its wire entries (as a decoder in a language
                    without Python's == may): keys that are one key after decode (`1` and `1.0`,
                    `true` and `1`, an int in two widths) stay twice in its `view`

`--ops decode,encode` and `--transports msgpack` make it list (and answer) only those, the way a
testee in another language starts out; checks that need the rest are skipped, naming it. Without
the pickle transport it cannot pickle either: an object to wrap in an `encode` view is `skipped`.

Only the framing is written out here; the JSON view is read with conformance.schema.golden.view,
the view's reference reader (any implementation may reuse it or write its own).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import enum
import json
import math
import os
import pickle
import platform
import re
import struct
import sys
import traceback
import types
from typing import Any, BinaryIO, Callable, Iterator, Optional

import msgspec

import reference_impl
from reference_impl import codec, io_struct
from reference_impl.errors import WireError
from reference_impl.pickle_wrapper import map_wrapped

PROTOCOL = 2
#: The version of spec/SPEC.md this testee implements (its first line; SPEC §14).
SPEC_VERSION = "3.0"
BREAKS = ("flip-byte", "drop-field", "unsafe-receive", "no-unwrap", "crash", "bad-frame", "float32", "int-floats",
          "drop-defaults", "accept-all", "nonfinite-nil", "falsy-wrap-nil", "trailing-byte",
          "refuse-unknown-map-keys", "no-map-defaults", "tuple-any-length", "device-to-cpu", "http-factory-required",
          "http-unknown-keys", "forget-define", "colliding-keys", "keep-colliding-keys")
OPS = ("decode", "encode", "http", "receive", "unwrap", "define")
_LEN = struct.Struct("<I")


class ParseError(Exception):
    pass


class SerializeError(Exception):
    pass


class Skip(Exception):
    pass


# -- framing ----------------------------------------------------------------------
def read_message(stream: BinaryIO) -> Optional[dict[str, Any]]:
    """The next request; None at the end of the stream. A whole frame that is not a msgpack
    map raises ParseError: the frame is consumed, so the conversation can go on."""
    head = stream.read(4)
    if len(head) < 4:
        return None
    (size,) = _LEN.unpack(head)
    body = stream.read(size)
    if len(body) < size:
        return None
    try:
        request = msgspec.msgpack.decode(body)
    except Exception as exc:  # noqa: BLE001 - DecodeError; UnicodeDecodeError or TypeError from msgspec <= 0.22
        raise ParseError(f"the request frame is not msgpack: {type(exc).__name__}: {exc}") from None
    if not isinstance(request, dict):
        raise ParseError(f"a request is a msgpack map, this frame holds a {type(request).__name__}")
    return request


def write_message(stream: BinaryIO, message: dict[str, Any]) -> None:
    body = msgspec.msgpack.encode(message)
    stream.write(_LEN.pack(len(body)) + body)
    stream.flush()


# -- byte-rule breaks: what encoders in other languages get wrong ---------------------------
BYTE_BREAKS = frozenset({"float32", "int-floats", "drop-defaults", "nonfinite-nil"})


def _break_bytes(data: bytes, obj: Any, breaks: set[str]) -> bytes:
    """The same message, written as a careless encoder would: every value still decodes to
    what was sent (decoders accept float 32, ints for floats and short arrays), only the
    byte rules of SPEC R-VAL-2 / R-MSG-2 are broken."""
    from conformance.schema import wire_form

    item = wire_form.parse(data)

    def narrow(node: wire_form.Item) -> wire_form.Item:
        if node.kind != "float64":
            return node
        if "int-floats" in breaks and float(node.value).is_integer() and abs(node.value) < 2**63:
            return wire_form.Item("int", int(node.value))
        if "float32" in breaks and wire_form.fits_float32(node.value):
            return wire_form.Item("float32", node.value)
        return node

    def nil_non_finite(node: wire_form.Item) -> wire_form.Item:
        # an array that is no struct (a struct's first element is its tag, a str)
        if node.kind != "array" or not node.items or node.items[0].kind == "str":
            return node
        return wire_form.Item("array", items=tuple(
            wire_form.Item("nil") if i.kind == "float64" and not math.isfinite(i.value) else i for i in node.items))

    item = wire_form.rewrite(item, narrow)
    if "nonfinite-nil" in breaks:
        item = wire_form.rewrite(item, nil_non_finite)
    if "drop-defaults" in breaks and isinstance(obj, msgspec.Struct) and item.kind == "array":
        item = wire_form.Item("array", items=item.items[:len(item.items) - trailing_defaults(obj)])
    return wire_form.write(item)


def trailing_defaults(obj: msgspec.Struct) -> int:
    """How many of obj's last fields equal their defaults (what a careless encoder leaves out)."""
    count = 0
    for field in reversed(msgspec.structs.fields(obj)):
        default = field.default
        if default is msgspec.NODEFAULT and field.default_factory is not msgspec.NODEFAULT:
            default = field.default_factory()
        value = getattr(obj, field.name)
        if default is msgspec.NODEFAULT or type(value) is not type(default) or not _equal(value, default):
            break
        count += 1
    return count


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - tensors and arrays have no single truth value
        return False


def _accept_all(data: bytes) -> bytes:
    """A decoder that checks nothing but msgpack itself: no types, tags, defaults or extension
    metadata (what the refusal vectors exist to catch); the untyped value goes back re-encoded."""
    try:
        value = msgspec.msgpack.decode(data, ext_hook=lambda code, raw: msgspec.msgpack.Ext(code, bytes(raw)))
    except Exception as exc:  # noqa: BLE001 - not msgpack at all: even this decoder gives up
        raise ParseError(f"{type(exc).__name__}: {exc}") from None
    return msgspec.msgpack.encode(value)


# -- keep-colliding-keys: a decoder that holds maps as their wire entries ------------------------------
def view_with_wire_maps(view: Any, data: bytes) -> Any:
    """The view with each field whose wire map (at any depth) holds keys equal under == replaced by
    the view of its wire entries, every entry kept (scalars and maps only; others stay as decoded)."""
    from conformance.schema.wire_form import parse

    top = parse(data)
    if top.kind != "array" or not isinstance(view, dict):
        return view
    names = [k for k in view if not k.startswith("$")]
    for name, item in zip(names, top.items[1:]):
        if _has_colliding(item):
            view[name] = _wire_view(item)
    return view


def _has_colliding(item: Any) -> bool:
    if item.kind == "map":
        keys = [_wire_view(k) for k in item.items[::2]]
        if any(isinstance(k, (int, float, str)) and keys.count(k) > 1 for k in keys):
            return True
    return any(_has_colliding(i) for i in item.items)


def _wire_view(item: Any) -> Any:
    if item.kind == "map":
        return {"$dict": [[_wire_view(k), _wire_view(v)] for k, v in zip(item.items[::2], item.items[1::2])]}
    if item.kind == "array":
        return [_wire_view(i) for i in item.items]
    if item.kind == "str":
        return item.value.decode("utf-8", "replace")
    if item.kind == "bin":
        return {"$bytes": base64.b64encode(item.value).decode()}
    return item.value


# -- colliding-keys: every key of a view's $dict written, even keys equal under == -------------------
_PLACEHOLDER = "\x00colliding-key-"


def keep_colliding_keys(view: Any, read_key: Callable[[Any], Any], held: dict[str, Any]) -> Any:
    """The view with each $dict key equal to an earlier key of its map replaced by a placeholder
    string (`held`: placeholder -> the key's own view), so that reading it keeps both."""
    if isinstance(view, list):
        return [keep_colliding_keys(v, read_key, held) for v in view]
    if not isinstance(view, dict):
        return view
    if set(view) == {"$dict"} and isinstance(view["$dict"], list):
        seen: list[Any] = []
        pairs = []
        for pair in view["$dict"]:
            if not (isinstance(pair, list) and len(pair) == 2):
                return view  # malformed: the reader reports it
            key, value = pair
            read = read_key(key)
            if any(read == other for other in seen):
                placeholder = f"{_PLACEHOLDER}{len(held)}"
                held[placeholder] = key
                key = placeholder
            seen.append(read)
            pairs.append([key, keep_colliding_keys(value, read_key, held)])
        return {"$dict": pairs}
    return {k: keep_colliding_keys(v, read_key, held) for k, v in view.items()}


def write_held_keys(data: bytes, held: dict[str, Any], read_key: Callable[[Any], Any]) -> bytes:
    """The msgpack bytes with each placeholder key written as the key it stands for."""
    from conformance.schema import wire_form

    items = {p.encode(): wire_form.from_value(read_key(key)) for p, key in held.items()}
    return wire_form.write(wire_form.rewrite(
        wire_form.parse(data), lambda node: items.get(node.value, node) if node.kind == "str" else node))


# -- decoder and HTTP bridge breaks: map-encoded structs, tuples, devices, HTTP keys --------------
def map_structs(value: Any, raw: Any) -> list[tuple[msgspec.Struct, dict[str, Any]]]:
    """Every map-encoded struct (array_like=False) in a decoded value, each with the msgpack map
    it was decoded from (`raw`: the same message read without types)."""
    found: list[tuple[msgspec.Struct, dict[str, Any]]] = []

    def walk(node: Any, wire: Any) -> None:
        if isinstance(node, msgspec.Struct):
            config = node.__struct_config__
            names = node.__struct_encode_fields__
            if not config.array_like and isinstance(wire, dict):
                found.append((node, wire))
                pairs = [(getattr(node, f), wire.get(n)) for f, n in zip(node.__struct_fields__, names) if n in wire]
            elif isinstance(wire, list):
                items = wire[1:] if config.tag is not None else wire
                pairs = list(zip((getattr(node, f) for f in node.__struct_fields__), items))
            else:
                return
            for child, child_wire in pairs:
                walk(child, child_wire)
        elif isinstance(node, (list, tuple)) and isinstance(wire, list):
            for child, child_wire in zip(node, wire):
                walk(child, child_wire)
        elif isinstance(node, dict) and isinstance(wire, dict):
            for child, child_wire in zip(node.values(), wire.values()):
                walk(child, child_wire)

    walk(value, raw)
    return found


def unknown_map_keys(value: Any, raw: Any) -> list[str]:
    """'Struct.key' for every map key a map-encoded struct in the value does not know."""
    return [f"{type(obj).__name__}.{key}" for obj, wire in map_structs(value, raw)
            for key in wire if key not in obj.__struct_encode_fields__]


def view_without_absent_fields(value: Any, raw: Any) -> Any:
    """The JSON view of value as a decoder that fills no defaults holds it: each map-encoded
    struct has only the fields its map carried."""
    from conformance.schema.golden.view import to_view

    absent = {id(obj): [f for f, n in zip(obj.__struct_fields__, obj.__struct_encode_fields__) if n not in wire]
              for obj, wire in map_structs(value, raw)}

    def view(node: Any) -> Any:
        if isinstance(node, msgspec.Struct):
            skip = absent.get(id(node), ())
            return {"$struct": type(node).__name__,
                    **{f: view(getattr(node, f)) for f in node.__struct_fields__ if f not in skip}}
        if isinstance(node, list):
            return [view(v) for v in node]
        return to_view(node)

    return view(value)


def fit_tuples(raw: Any, manifest: Any, struct: Optional[str] = None) -> Any:
    """The untyped message with every fixed-size tuple cut or padded to its declared length (the
    last element repeated): what a decoder that reads a tuple as any array then delivers."""
    from conformance.schema.manifest.typeexpr import T

    def fit(t: T, node: Any) -> Any:
        if node is None:
            return node
        if t.kind == "Union":
            arms = [a for a in t.args if a.kind != "None"]
            return fit(arms[0], node) if len(arms) == 1 else node
        if t.kind == "Tuple" and t.args and isinstance(node, list) and node:
            node = (node + [node[-1]] * len(t.args))[:len(t.args)]
            return [fit(a, v) for a, v in zip(t.args, node)]
        if t.kind in ("List", "VarTuple", "Set", "FrozenSet") and isinstance(node, list):
            return [fit(t.args[0], v) for v in node]
        if t.kind == "Dict" and isinstance(node, dict):
            return {k: fit(t.args[1], v) for k, v in node.items()}
        spec = manifest.structs.get(t.name or "") if t.kind == "Ref" else None
        if spec is None:
            return node
        if isinstance(node, list) and spec.array_like:
            start = 1 if spec.tag else 0
            return node[:start] + [fit(f.type_expr, v) for f, v in zip(spec.fields, node[start:])] + \
                node[start + len(spec.fields):]
        if isinstance(node, dict):
            types = {f.encode_name or f.name: f.type_expr for f in spec.fields}
            return {k: fit(types[k], v) if k in types else v for k, v in node.items()}
        return node

    if isinstance(raw, list) and raw and isinstance(raw[0], str) and raw[0] in manifest.structs:
        return fit(T("Ref", name=raw[0]), raw)
    return raw


def http_json_with_breaks(cls: type, json_text: str, breaks: set[str]) -> str:
    """The HTTP JSON body as a broken bridge sees it: `http-unknown-keys` drops the keys the
    struct does not know (so they pass); `http-factory-required` refuses a body that omits a field
    with a default factory, as if it had no default."""
    if not breaks & {"http-unknown-keys", "http-factory-required"}:
        return json_text
    body = json.loads(json_text)
    if not isinstance(body, dict):
        return json_text
    fields = msgspec.structs.fields(cls)
    if "http-factory-required" in breaks:
        missing = [f.name for f in fields if f.default_factory is not msgspec.NODEFAULT and f.name not in body]
        if missing:
            raise ParseError(f"{cls.__name__}.{missing[0]}: Field required")
    if "http-unknown-keys" in breaks:
        known = {f.name for f in fields}
        body = {k: v for k, v in body.items() if k in known}
    return json.dumps(body)


# -- the implementation -------------------------------------------------------------
class Testee:
    def __init__(self, breaks: set[str], ops: tuple[str, ...] = OPS,
                 transports: tuple[str, ...] = ("msgpack", "pickle"), tensor_kind: str = "runtime",
                 spec: str = SPEC_VERSION) -> None:
        self.breaks = breaks
        self.tensor_kind = tensor_kind
        self._held: dict[int, tuple[Any, str]] = {}  # --tensors values: id(tensor) -> (tensor, device)
        self.spec = spec
        self.ops = ops
        self.transports = transports
        self.view: Optional[str] = None  # the view of the last decode's value (protocol 2)
        self.classes: dict[str, type] = {
            name: obj for name, obj in vars(io_struct).items()
            if isinstance(obj, type) and (issubclass(obj, msgspec.Struct) or issubclass(obj, enum.Enum))
            and obj.__module__ == io_struct.__name__
        }

    def started(self) -> dict[str, Any]:
        return {
            "type": "started",
            "protocol": PROTOCOL,
            "implementation": {
                "name": "reference-testee",
                "version": reference_impl.__version__,
                "language": f"python {platform.python_version()}",
                "breaks": sorted(self.breaks),
            },
            "manifest": io_struct.MANIFEST_ID,
            "transports": list(self.transports),
            "ops": list(self.ops),
            "tensors": self.tensor_kind,  # runtime: torch refuses a device it does not have (SPEC R-TEN-3)
            "spec": self.spec,
        }

    # wire helpers
    def _decode(self, data: bytes, transport: str, **options: Any) -> Any:
        if transport == "pickle":
            try:
                return pickle.loads(data)  # the runner is a trusted peer
            except Exception as exc:  # noqa: BLE001 - unpickling can raise anything; the runner hears it
                raise ParseError(f"{type(exc).__name__}: {exc}") from None
        try:
            with self._decoder_breaks():
                obj = codec.decode(data, "msgpack", **{"unwrap_wrappers": False, **options})
        except WireError as exc:
            if "tuple-any-length" not in self.breaks:
                raise ParseError(str(exc)) from None
            obj = self._decode_fitting_tuples(data, options, exc)
        if "refuse-unknown-map-keys" in self.breaks:
            unknown = unknown_map_keys(obj, _untyped(data))
            if unknown:
                raise ParseError(f"msgpack decode: {unknown[0]}: unknown field")
        return obj

    def _decoder_breaks(self) -> Any:
        from reference_impl import ext

        if "device-to-cpu" in self.breaks:
            return patched(ext, "_to_device", lambda tensor, device: tensor)
        if self.tensor_kind == "values":
            return patched(ext, "_to_device", self._hold_device)
        return contextlib.nullcontext()

    def _hold_device(self, tensor: Any, device: Any) -> Any:
        """--tensors values: a tensor on any device is held as its CPU bytes plus the device
        string, which its re-encode writes back (what a testee without a device runtime does)."""
        from reference_impl import ext

        match = _VALUE_DEVICE.fullmatch(device) if isinstance(device, str) else None
        if match is None or int(match.group(2)) > ext.MAX_DEVICE_INDEX or match.group(1) in ("cpu", "meta"):
            raise WireError("msgpack", f"tensor device {device!r} is not cpu nor <type>:<index> with an index "
                                       f"of at most {ext.MAX_DEVICE_INDEX}")
        self._held[id(tensor)] = (tensor, device)
        return tensor

    def _metadata_with_held_device(self, original: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def metadata(tensor: Any) -> Any:
            shape, dtype, device = original(tensor)
            held = self._held.get(id(tensor))
            return shape, dtype, held[1] if held is not None and held[0] is tensor else device
        return metadata

    def _decode_fitting_tuples(self, data: bytes, options: dict[str, Any], error: WireError) -> Any:
        from conformance.schema.manifest import load_manifest
        from conformance.schema.wire_form import read_value, write_value

        fitted = write_value(fit_tuples(read_value(data), load_manifest(io_struct.MANIFEST_ID)))
        if fitted == data:
            raise ParseError(str(error)) from None
        try:
            return codec.decode(fitted, "msgpack", **{"unwrap_wrappers": False, **options})
        except WireError as exc:
            raise ParseError(str(exc)) from None

    def _encode(self, obj: Any, transport: str) -> bytes:
        from reference_impl import ext

        held = patched(ext, "tensor_metadata", self._metadata_with_held_device(ext.tensor_metadata)) \
            if self._held else contextlib.nullcontext()
        try:
            with held:
                data = codec.encode(obj, transport)
        except WireError as exc:
            raise SerializeError(str(exc)) from None
        if "flip-byte" in self.breaks and transport == "msgpack" and data:
            data = data[:-1] + bytes([data[-1] ^ 0x01])
        if "trailing-byte" in self.breaks and transport == "msgpack":
            data += b"\xc0"  # a nil after the message: its own strict decoder refuses it (R-MSG-11)
        if transport == "msgpack" and self.breaks & BYTE_BREAKS:
            data = _break_bytes(data, obj, self.breaks)
        return data

    def _transport(self, request: dict[str, Any]) -> str:
        transport = str(request.get("transport", "msgpack"))
        if transport not in self.transports:
            raise Skip(f"transport {transport!r}")
        return transport

    # ops
    def op_decode(self, request: dict[str, Any]) -> bytes:
        transport = self._transport(request)
        if "crash" in self.breaks:
            os._exit(3)
        if "accept-all" in self.breaks and transport == "msgpack":
            return _accept_all(request["payload"])
        obj = self._decode(request["payload"], transport)
        if "drop-field" in self.breaks and isinstance(obj, msgspec.Struct) and obj.__struct_fields__:
            last = msgspec.structs.fields(obj)[-1]
            if last.default is not msgspec.NODEFAULT:
                msgspec.structs.force_setattr(obj, last.name, last.default)
            elif last.default_factory is not msgspec.NODEFAULT:
                msgspec.structs.force_setattr(obj, last.name, last.default_factory())
        payload = self._encode(obj, transport)
        self.view = self._view_of(obj, request["payload"], transport)
        return payload

    def _view_of(self, obj: Any, data: bytes, transport: str) -> Optional[str]:
        """The JSON view of the decoded value itself (protocol 2), for msgpack decodes."""
        from conformance.schema.golden.view import ViewError, dumps, to_view

        if transport != "msgpack":
            return None  # a pickled object may have no view; protocol 2 asks for msgpack decodes only
        try:
            if "no-map-defaults" in self.breaks:
                return dumps(view_without_absent_fields(obj, _untyped(data)))
            if "keep-colliding-keys" in self.breaks:
                return dumps(view_with_wire_maps(to_view(obj), data))
            return dumps(to_view(obj))
        except ViewError:
            return None

    def op_encode(self, request: dict[str, Any]) -> bytes:
        from conformance.schema.golden.view import ViewError, from_view

        transport = self._transport(request)
        held: dict[str, Any] = {}
        try:
            view = json.loads(request["view"])
            if "colliding-keys" in self.breaks and transport == "msgpack":
                view = keep_colliding_keys(view, self._read_key, held)
            obj = from_view(view, self.classes)
        except (ViewError, ValueError, KeyError) as exc:
            raise ParseError(f"bad JSON view: {exc}") from None
        if "falsy-wrap-nil" in self.breaks:  # a truthiness test where the sender wraps
            map_wrapped(obj, lambda v, s, p: v if isinstance(v, io_struct.PickleWrapper) or _truthy(v) else None)
        if "pickle" not in self.transports:  # then it cannot pickle either, as a non-Python testee
            unwrapped = _objects_to_wrap(obj)
            if unwrapped:
                raise Skip(f"{', '.join(unwrapped)}: an object to wrap, and this testee cannot pickle (SPEC R-PW-6)")
        data = self._encode(obj, transport)
        return write_held_keys(data, held, self._read_key) if held else data

    def _read_key(self, key: Any) -> Any:
        from conformance.schema.golden.view import from_view

        return from_view(key, self.classes)

    def op_http(self, request: dict[str, Any]) -> bytes:
        from pydantic import TypeAdapter, ValidationError

        cls = self.classes.get(request.get("struct", ""))
        if cls is None:
            raise ParseError(f"unknown struct {request.get('struct')!r}")
        try:
            obj: Any = TypeAdapter(cls).validate_json(http_json_with_breaks(cls, request["json"], self.breaks))
        except ValidationError as exc:
            raise ParseError(str(exc)) from None
        return self._encode(obj, "msgpack")

    def op_receive(self, request: dict[str, Any]) -> bytes:
        """The receive path for a peer that is not trusted."""
        transport = self._transport(request)
        if "unsafe-receive" in self.breaks and transport == "msgpack":
            obj = self._decode(request["payload"], transport)
            obj = map_wrapped(obj, lambda wrapper, s, p: pickle.loads(wrapper.data))
        elif transport == "msgpack":
            obj = self._decode(request["payload"], transport, unwrap_wrappers=True, allow_pickle=False)
        else:
            obj = self._decode(request["payload"], transport)
        return self._encode(obj, transport)

    def op_unwrap(self, request: dict[str, Any]) -> bytes:
        """The receive path for a trusted peer: every PickleWrapper opened; answered as pickle."""
        obj = self._decode(request["payload"], self._transport(request))
        if "no-unwrap" not in self.breaks:
            try:
                obj = codec.unwrap(obj, allow_pickle=True)
            except WireError as exc:
                raise ParseError(str(exc)) from None
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)

    def op_define(self, request: dict[str, Any]) -> bytes:
        """A subclass of a message defined after start-up (struct discovery must find it)."""
        name, base = request.get("name"), self.classes.get(request.get("base", ""))
        if not isinstance(name, str) or not name.isidentifier() or base is None:
            raise ParseError(f"cannot define {name!r} on base {request.get('base')!r}")
        if "forget-define" in self.breaks:
            return b""
        late = types.new_class(name, (base,), {"kw_only": True})
        module = request.get("module")
        if isinstance(module, str) and module:  # so pickles name the same class on both sides
            late.__module__ = module
            holder = sys.modules.setdefault(module, types.ModuleType(module))
            setattr(holder, name, late)
        self.classes[name] = late
        return b""

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        kind = request.get("type")
        if kind == "start":
            return self.started()
        if kind == "stop":
            return {"type": "stopped"}
        answer: dict[str, Any] = {"id": request.get("id")}
        handler: Optional[Callable[[dict[str, Any]], bytes]] = (
            getattr(self, f"op_{kind}", None) if kind in self.ops else None)
        try:
            if handler is None:
                raise Skip(f"unknown request type {kind!r}")
            self.view = None
            self._held.clear()
            answer.update(result="payload", payload=handler(request))
            if kind == "decode" and self.view is not None:
                answer["view"] = self.view
        except ParseError as exc:
            answer.update(result="parse_error", message=str(exc))
        except SerializeError as exc:
            answer.update(result="serialize_error", message=str(exc))
        except Skip as exc:
            answer.update(result="skipped", message=str(exc))
        except Exception as exc:  # noqa: BLE001 - anything else is the testee's own failure
            answer.update(result="runtime_error",
                          message=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")
        return answer


def _truthy(value: Any) -> bool:
    try:
        return bool(value)
    except Exception:  # noqa: BLE001 - arrays have no single truth value: a careless sender wraps them
        return True
_VALUE_DEVICE = re.compile(r"([a-z][a-z0-9_]*):(0|[1-9][0-9]*)")


def _untyped(data: bytes) -> Any:
    return msgspec.msgpack.decode(data, ext_hook=lambda code, raw: msgspec.msgpack.Ext(code, bytes(raw)))


@contextlib.contextmanager
def patched(target: Any, name: str, replacement: Any) -> Iterator[None]:
    """target.name = replacement for the duration of one call (a planted bug, here and in the
    mutants of reference_tools/proof, stays within the call it changes)."""
    original = getattr(target, name)
    setattr(target, name, replacement)
    try:
        yield
    finally:
        setattr(target, name, original)


def _objects_to_wrap(obj: Any) -> list[str]:
    """Where a PickleWrapper-typed field holds an object rather than a wrapper."""
    found: list[str] = []

    def note(value: Any, struct: str, path: str) -> Any:
        if not isinstance(value, io_struct.PickleWrapper):
            found.append(f"{struct}{path}")
        return value

    map_wrapped(obj, note)
    return found


def _subset_of(allowed: tuple[str, ...]) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        chosen = tuple(item for item in text.split(",") if item)
        unknown = sorted(set(chosen) - set(allowed))
        if unknown or not chosen:
            raise argparse.ArgumentTypeError(f"{text!r}: choose from {', '.join(allowed)}")
        return chosen
    return parse


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reference_impl.testee", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--break", dest="breaks", action="append", default=[], choices=BREAKS,
                        help="behave wrongly on purpose (repeatable)")
    parser.add_argument("--ops", type=_subset_of(OPS), default=OPS,
                        help="comma-separated ops to list in the handshake (decode and encode are required)")
    parser.add_argument("--tensors", choices=("runtime", "values"), default="runtime",
                        help="how it says it holds tensors (handshake 'tensors'): values = as bytes plus the device "
                             "string, carrying any <type>:<index> device as a testee without torch does")
    parser.add_argument("--transports", type=_subset_of(("msgpack", "pickle")), default=("msgpack", "pickle"),
                        help="comma-separated transports to list in the handshake")
    parser.add_argument("--spec", default=SPEC_VERSION,
                        help=f"the spec version to declare in the handshake (default {SPEC_VERSION}, the one it "
                             "implements)")
    args = parser.parse_args(argv)
    out, inp = sys.stdout.buffer, sys.stdin.buffer
    sys.stdout = sys.stderr  # a stray print must never corrupt the protocol stream
    testee = Testee(set(args.breaks), args.ops, args.transports, args.tensors, args.spec)
    while True:
        try:
            request = read_message(inp)
        except ParseError as exc:  # no id to answer to: nil
            write_message(out, {"id": None, "result": "parse_error", "message": str(exc)})
            continue
        if request is None:
            return 0
        answer = testee.handle(request)
        if "bad-frame" in testee.breaks and request.get("type") == "decode":
            out.write(_LEN.pack(1000) + b"\x81")
            out.flush()
            return 4
        write_message(out, answer)
        if request.get("type") == "stop":
            return 0


if __name__ == "__main__":
    sys.exit(main())
