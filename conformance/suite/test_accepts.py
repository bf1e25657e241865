"""Decoders accept every valid encoding, not only the canonical one (SPEC §3, R-VAL-2, R-MSG-5,
R-VEC-2): each golden vector, rewritten in a form a correct encoder elsewhere may write, must
decode to the same value.

Forms: ``float32`` (floats that fit, as float 32), ``int_floats`` (integral values of the
message's own float fields as ints), ``wide_ints`` (every int in its 64-bit form), ``short``
(trailing fields equal to their defaults left out), ``extra`` (an element after the last field).
Only the forms that change a vector's bytes are checked for it.

Map-encoded structs (R-MSG-4): each one, at the first message whose typical vector carries it,
with an unknown key (ignored) and without its defaulted fields (defaults filled), judged on the
decoder's own value: an in-process decoder's object, a testee's protocol-2 `view`.

Maps with one key twice (R-VAL-6): a decoder refuses or keeps one entry (`DuplicateKeyLastValue`);
an encoder handed keys that are one key to a Python peer refuses or writes one
(`CollidingKeysNotWritten`).
"""

from __future__ import annotations

import enum
import json
import math
from functools import lru_cache
from typing import Any, Callable, Optional

import msgspec

from conformance.compare import differences
from conformance.plugin import check, harness_error
from conformance.schema.wire_form import Float32, MapPairs, WideInt, fits_float32
from conformance.schema.wire_form import read_value as read
from conformance.schema.wire_form import rewrite_value as rewrite
from conformance.schema.wire_form import write_value as write
from conformance.suite.failure import DECODE_RUNNER_BYTES, ENCODE, Failure, fail, raise_failure
from conformance.suite.fields import OPAQUE_DEFAULT, default_value, manifest_default
from conformance.testee.adapter import TesteeAnswerError

FLOAT_FIELDS = ("float", "Optional[float]")


def _float32(value: Any) -> Any:
    return Float32(value) if type(value) is float and math.isfinite(value) and fits_float32(value) else value


def _wide(value: Any) -> Any:
    return WideInt(value) if type(value) is int and -(1 << 63) <= value < 1 << 64 else value


def _default_on_wire(field: Any) -> Any:
    """The wire value of a field's default, or a marker when it has none that is a constant."""
    d = field.default
    if d.kind == "value":
        return d.value
    if d.kind == "factory" and d.factory in ("list", "tuple", "set", "frozenset"):
        return []
    if d.kind == "factory" and d.factory == "dict":
        return {}
    return _NONE


_NONE = object()


def _forms(spec: Any) -> dict[str, Callable[[Any], Optional[Any]]]:
    def short(tree: Any) -> Optional[Any]:
        n = len(tree)
        for field in reversed(spec.fields[:n - 1]):
            default = _default_on_wire(field)
            if default is _NONE or tree[n - 1] != default or type(tree[n - 1]) is not type(default):
                break
            n -= 1
        return tree[:n] if n < len(tree) else None

    def int_floats(tree: Any) -> Optional[Any]:
        # the message's own float fields get integral values, sent as ints (expected: those floats)
        out = list(tree)
        for i, field in enumerate(spec.fields, 1):
            if field.type in FLOAT_FIELDS and i < len(out) and type(out[i]) is float and math.isfinite(out[i]):
                out[i] = int(out[i])
        return out

    return {
        "float32": lambda tree: rewrite(tree, _float32),
        "int_floats": int_floats,
        "wide_ints": lambda tree: rewrite(tree, _wide),
        "short": short,
        "extra": lambda tree: None if spec.options.get("forbid_unknown_fields") else [*tree, None, "extra"],
    }


VARIANT = {"short": "minimal"}
FORM_REQUIREMENTS = {"float32": "R-VAL-2 (decoders accept float 32)", "int_floats": "R-VAL-2 (decoders accept ints "
                     "for a float)", "wide_ints": "§3 (decoders accept any int width)", "short": "R-MSG-5",
                     "extra": "R-MSG-5"}  # the minimal instance leaves its optional fields at their defaults


@lru_cache(maxsize=None)
def _rewritten(manifest_json: bytes, manifest_id: str) -> dict[str, bytes]:
    """'<Struct>.<form>' -> the rewritten vector, for every form that changes the bytes."""
    from conformance.schema.manifest.model import Manifest
    from conformance.suite.vectors import golden_vectors

    manifest = msgspec.json.decode(manifest_json, type=Manifest)
    paths = golden_vectors(manifest_json, manifest_id)  # empty when the vectors are stale
    out = {}
    for spec in manifest.messages:
        if not spec.options.get("array_like"):
            continue
        for form, fn in _forms(spec).items():
            path = paths.get((spec.name, VARIANT.get(form, "typical")))
            if path is None:
                continue
            data = path.read_bytes()
            tree = read(data)
            changed = fn(tree)
            if changed is not None:
                new = write(changed)
                if new != data:
                    out[f"{spec.name}.{form}"] = new
    return out


def _cases(ipc) -> list[str]:
    if "msgpack" not in ipc.transports:
        return []
    return list(_rewritten(ipc.manifest.to_json(), ipc.manifest.id))


@check("Accepts", per=("case",), name="Decode", cases={"case": _cases})
def test_decoder_accepts_other_valid_forms(ipc, case):
    struct_name, form = case.rsplit(".", 1)
    data = _rewritten(ipc.manifest.to_json(), ipc.manifest.id)[case]
    expected = ipc.instance(struct_name, VARIANT.get(form, "typical"))
    if form == "int_floats":
        for field in ipc.manifest.structs[struct_name].fields:
            value = getattr(expected, field.name)
            if field.type in FLOAT_FIELDS and type(value) is float and math.isfinite(value):
                setattr(expected, field.name, float(int(value)))
    step = f"{DECODE_RUNNER_BYTES} (its golden vector, rewritten in the {form} form)"
    requirement = FORM_REQUIREMENTS[form]
    try:
        decoded = ipc.adapter.decode(data, "msgpack")
    except Exception as exc:
        if harness_error(exc):
            raise
        if isinstance(exc, TesteeAnswerError):  # it decoded: the runner cannot read its re-encoded answer
            raise_failure(Failure(
                f"{struct_name}: the {form} form of its golden vector is valid msgpack of the same value; the "
                f"decoder accepted it, but the runner cannot read its answer: {str(exc).splitlines()[0]}",
                requirement, f"{step}; then the runner's reference decode of the testee's answer (its re-encode)",
                data=data, value=expected, kind="Failed"), ipc)
        raise_failure(Failure(
            f"{struct_name}: the {form} form of its golden vector is valid msgpack of the same value, "
            f"yet the decoder refused it: {type(exc).__name__}: {exc}", requirement, step, data=data,
            value=expected, kind="Failed"), ipc)
    diffs = differences(expected, decoded)
    if diffs:
        raise_failure(Failure(f"{struct_name}: the {form} form of its golden vector decodes to another value",
                              requirement, step, diffs, data, expected), ipc)


# -- extensions this spec does not interpret are forwarded as they are (R-EXT-4) -------------
OPAQUE = {"unassigned": msgspec.msgpack.Ext(9, b"\x00opaque\xff"),
          "shm_pointer": msgspec.msgpack.Ext(4, b"\x81\xa1k\x01")}
ANY_MAPS = ("Dict[str, Any]", "Optional[Dict[str, Any]]")


def _any_map_structs(ipc) -> list[str]:
    if "msgpack" not in ipc.transports:
        return []
    return [s.name for s in ipc.manifest.messages if s.options.get("array_like")
            and any(f.type in ANY_MAPS for f in s.fields)]


def _with_any_map(ipc, struct: str, replacement: Any) -> tuple[str, int, list[Any], bytes]:
    """The struct's typical vector with its first Any-valued map replaced: (field name, its
    position in the array, the untyped tree, the bytes)."""
    from conformance.suite.vectors import golden_vector

    spec = ipc.manifest.structs[struct]
    position = next(i for i, f in enumerate(spec.fields, 1) if f.type in ANY_MAPS)
    tree = read(golden_vector(ipc, struct, "typical"))
    tree[position] = replacement
    return spec.fields[position - 1].name, position, tree, write(tree)


@check("Accepts", per=("struct",), name="UnknownExtensionForwarded", cases={"struct": _any_map_structs})
def test_unknown_extension_is_forwarded(ipc, struct):
    name, position, tree, data = _with_any_map(ipc, struct, dict(OPAQUE))
    step = f"{DECODE_RUNNER_BYTES} (its typical vector, {name} holding extensions 9 and 4)"
    try:
        decoded = ipc.adapter.decode(data, "msgpack")
        step = "the implementation's encode of the value it decoded from bytes the runner wrote"
        encoded = ipc.adapter.encode(decoded, "msgpack")
        again = read(encoded)
    except Exception as exc:
        if harness_error(exc):
            raise
        raise_failure(Failure(f"{struct}.{name} holding extensions 9 and 4 (opaque here) did not "
                              f"decode and encode again: {type(exc).__name__}: {exc}", "R-EXT-4", step,
                              data=data, kind="Failed"), ipc)
    if again[position] != tree[position]:
        raise_failure(Failure(f"{struct}.{name}: extensions 9 and 4 came back as {again[position]!r}, "
                              "not as the same extension bytes", "R-EXT-4", f"{step} (its bytes shown)",
                              [f"$.{name}: expected {tree[position]!r}, got {again[position]!r}"], encoded), ipc)


# -- a map with a duplicate key: refused, or one entry with the last value (R-VAL-6) ----------
DUPLICATED = MapPairs([("key", 1), ("other", 2), ("key", 3)])


@check("Accepts", per=("struct",), name="DuplicateKeyLastValue", cases={"struct": _any_map_structs})
def test_duplicate_map_key(ipc, struct):
    name, _, _, data = _with_any_map(ipc, struct, DUPLICATED)
    try:
        decoded = ipc.adapter.decode(data, "msgpack")
    except Exception as exc:
        if harness_error(exc):
            raise  # a crash or a hang is no refusal
        return  # refusing the message is allowed
    got = getattr(decoded, name)
    if not (isinstance(got, dict) and list(got.items()) == [("key", 3), ("other", 2)]):
        raise_failure(Failure(
            f"{struct}.{name}: the map {{'key': 1, 'other': 2, 'key': 3}} decoded to {got!r}; SPEC R-VAL-6 allows only "
            "a refusal or {'key': 3, 'other': 2} (first key's position, last value)", "R-VAL-6",
            f"{DECODE_RUNNER_BYTES} (its typical vector, {name} a map with a duplicate key)",
            [f"$.{name}: expected {{'key': 3, 'other': 2}}, got {got!r}"], data), ipc)


# -- map-encoded structs: unknown keys ignored, absent fields take their defaults (R-MSG-4) ------
UNKNOWN_KEY = "no_such_field"


@lru_cache(maxsize=None)
def _map_sites(manifest_json: bytes, manifest_id: str) -> dict[str, tuple[str, str, tuple[Any, ...]]]:
    """map struct -> (host message, map struct, the path to the map: ('field', name) and ('item',
    index) steps), for the first place each map-encoded (array_like: false) struct holds a map
    in a typical golden vector (messages by name)."""
    from conformance.schema.manifest.model import Manifest
    from conformance.suite.vectors import golden_vectors

    manifest = msgspec.json.decode(manifest_json, type=Manifest)
    paths = golden_vectors(manifest_json, manifest_id)
    sites: dict[str, tuple[str, str, tuple[Any, ...]]] = {}
    found: set[str] = set()

    def walk(host: str, t: Any, node: Any, steps: tuple[Any, ...], where: str) -> None:
        if node is None:
            return
        if t.kind == "Union":
            arms = [a for a in t.args if a.kind != "None"]
            if len(arms) == 1:
                walk(host, arms[0], node, steps, where)
            return
        if t.kind in ("List", "VarTuple") and isinstance(node, list) and node:
            walk(host, t.args[0], node[0], steps + (("item", 0),), f"{where}[0]")
            return
        spec = manifest.structs.get(t.name or "") if t.kind == "Ref" else None
        if spec is None or spec.name == "PickleWrapper":
            return
        if not spec.array_like and isinstance(node, dict):
            if spec.name not in found:
                found.add(spec.name)
                sites[spec.name] = (host, spec.name, steps)
            for f in spec.fields:
                key = f.encode_name or f.name
                if key in node:
                    walk(host, f.type_expr, node[key], steps + (("field", f.name),), f"{where}.{f.name}")
        elif spec.array_like and isinstance(node, list):
            start = 1 if spec.tag else 0
            for f, value in zip(spec.fields, node[start:]):
                walk(host, f.type_expr, value, steps + (("field", f.name),), f"{where}.{f.name}")

    for spec in sorted(manifest.messages, key=lambda s: s.name):
        path = paths.get((spec.name, "typical"))
        if path is None or not spec.array_like:
            continue
        tree = msgspec.msgpack.decode(path.read_bytes(), ext_hook=lambda code, raw: None)
        for f, value in zip(spec.fields, tree[1:]):
            walk(spec.name, f.type_expr, value, (("field", f.name),), f.name)
    return sites


def _map_cases(ipc) -> list[str]:
    if "msgpack" not in ipc.transports:
        return []
    return list(_map_sites(ipc.manifest.to_json(), ipc.manifest.id))


def _map_default_cases(ipc) -> list[str]:
    return [struct for struct in _map_cases(ipc) if _defaulted(ipc, struct)]


def _defaulted(ipc, struct: str) -> list[Any]:
    return [f for f in ipc.manifest.structs[struct].fields
            if f.default.kind != "required" and manifest_default(f) is not OPAQUE_DEFAULT]


def _at(value: Any, steps: tuple[Any, ...]) -> Any:
    for kind, key in steps:
        value = getattr(value, key) if kind == "field" else value[key]
    return value


def _view_at(view: Any, steps: tuple[Any, ...]) -> Any:
    for kind, key in steps:
        if kind == "field":
            if not isinstance(view, dict) or key not in view:
                raise KeyError(key)
            view = view[key]
        else:
            if not isinstance(view, list) or len(view) <= key:
                raise KeyError(key)
            view = view[key]
    return view


def _edited_map(ipc, host: str, steps: tuple[Any, ...], edit: Callable[[dict[str, Any]], dict[str, Any]]) -> bytes:
    """The host's typical vector with the map at `steps` replaced by edit(map)."""
    from conformance.suite.vectors import golden_vector

    spec = ipc.manifest.structs[host]
    tree = read(golden_vector(ipc, host, "typical"))
    node: Any = tree
    parent: Any = None
    key: Any = None
    structs = [spec]
    for kind, step in steps:
        parent = node
        if kind == "field":
            current = structs[-1]
            index = [f.name for f in current.fields].index(step)
            if isinstance(node, dict):
                key = current.fields[index].encode_name or step
            else:
                key = index + (1 if current.tag else 0)
            structs.append(_struct_of(ipc, current.fields[index].type_expr))
        else:
            key = step
        node = node[key]
    parent[key] = edit(node)
    return write(tree)


def _struct_of(ipc, t: Any) -> Any:
    """The struct spec a field's type leads to (through Optional and List), or the last one."""
    while t.kind in ("Union", "List", "VarTuple"):
        t = next(a for a in t.args if a.kind != "None")
    return ipc.manifest.structs.get(t.name or "")


def _view_differences(expected: Any, got: Any, path: str) -> list[str]:
    """Where the testee's JSON view differs from the expected one (types kept apart: 1 is not
    1.0 nor true; floats by their text, so -0.0 is not 0.0)."""
    if isinstance(expected, dict) and isinstance(got, dict):
        out = [f"{path}.{k}: absent from the decoded value (SPEC R-MSG-4: the decoder fills in the default, "
               f"{json.dumps(expected[k])})" for k in expected if k not in got]
        out += [f"{path}.{k}: in the decoded value, but no field of the manifest (an unknown key kept?)"
                for k in got if k not in expected]
        for k in expected:
            if k in got:
                out += _view_differences(expected[k], got[k], f"{path}.{k}" if not k.startswith("$") else path)
        return out
    if isinstance(expected, list) and isinstance(got, list):
        if len(expected) != len(got):
            return [f"{path}: {len(got)} items, expected {len(expected)}"]
        return [d for i, (e, g) in enumerate(zip(expected, got)) for d in _view_differences(e, g, f"{path}[{i}]")]
    if type(expected) is not type(got) or repr(expected) != repr(got):
        return [f"{path}: {json.dumps(got)}, expected {json.dumps(expected)}"]
    return []


def _shown(view: Any, limit: int = 400) -> str:
    """A view as the failure shows it: its JSON, truncated."""
    text = json.dumps(view, default=repr)
    return text if len(text) <= limit else text[:limit] + " ..."


def _judge_map(ipc, case: str, data: bytes, expected: Any, what: str) -> None:
    """The implementation's own decoded value at the map's place must equal `expected`: an
    in-process decoder's object, a testee's reported view (never its re-encode, which a reader
    would repair)."""
    from conformance.schema.golden.view import to_view
    from conformance.testee.adapter import SubprocessAdapter

    host, struct, steps = _map_sites(ipc.manifest.to_json(), ipc.manifest.id)[case]
    where = ".".join(str(key) if kind == "field" else f"[{key}]" for kind, key in steps).replace(".[", "[")
    if isinstance(ipc.adapter, SubprocessAdapter):
        step = ("the testee's decode of bytes the runner wrote (a map-encoded struct), judged on the view it "
                "reports (testee protocol 2)")
        try:
            view = ipc.adapter.decoded_view(data, "msgpack")
        except Exception as exc:
            if harness_error(exc) or not isinstance(exc, ValueError):
                raise
            fail(f"{host}.{where} ({struct}, map-encoded) {what}: the decoder refused it "
                 f"(SPEC R-MSG-4: it MUST decode): {exc}", "R-MSG-4", step=step, data=data, value=expected,
                 kind="Failed", ipc=ipc)
        try:
            got = _view_at(view, steps)
        except KeyError as exc:
            fail(f"{host}.{where}: the decoded value's view has no {exc} (SPEC §13.3: every field)", "R-MSG-4",
                 step=step, data=data, notes=[f"the view judged: {_shown(view)}"], kind="Failed", ipc=ipc)
        diffs = _view_differences(to_view(expected), got, f"{host}.{where}")
        if diffs:
            fail(f"{host}.{where} ({struct}, map-encoded, msgpack) {what}: the testee's decoded value "
                 f"(its view) differs", "R-MSG-4", step=step, differences=diffs, data=data, value=expected,
                 notes=[f"the view judged, at {host}.{where}: {_shown(got)}"], ipc=ipc)
        return
    try:
        decoded = ipc.adapter.decode(data, "msgpack")
    except Exception as exc:  # noqa: BLE001 - any refusal of valid bytes is the finding
        fail(f"{host}.{where} ({struct}, map-encoded, msgpack) {what}: the decoder refused it "
             f"(SPEC R-MSG-4: it MUST decode): {type(exc).__name__}: {exc}", "R-MSG-4", step=DECODE_RUNNER_BYTES,
             data=data, value=expected, kind="Failed", ipc=ipc)
    diffs = differences(expected, _at(decoded, steps), f"{host}.{where}")
    if diffs:
        fail(f"{host}.{where} ({struct}, map-encoded, msgpack) {what}: decoded to another value", "R-MSG-4",
             step=DECODE_RUNNER_BYTES, differences=diffs, data=data, value=expected, ipc=ipc)


@check("Accepts", per=("case",), name="MapUnknownKey", cases={"case": _map_cases})
def test_map_unknown_key_ignored(ipc, case):
    host, struct, steps = _map_sites(ipc.manifest.to_json(), ipc.manifest.id)[case]
    data = _edited_map(ipc, host, steps, lambda node: {**node, UNKNOWN_KEY: [1, "two"]})
    if ipc.manifest.structs[struct].options.get("forbid_unknown_fields"):
        try:
            ipc.adapter.decode(data, "msgpack")
        except Exception as exc:
            if harness_error(exc):
                raise
            return
        fail(f"{host}: {struct} forbids unknown fields, yet a map with the key {UNKNOWN_KEY!r} decoded "
             "(SPEC R-MSG-4)", "R-MSG-4", step=DECODE_RUNNER_BYTES, data=data, kind="Failed", ipc=ipc)
    expected = _at(ipc.instance(host, "typical"), steps)
    _judge_map(ipc, case, data, expected, f"with an unknown key {UNKNOWN_KEY!r} (to be ignored)")


@check("Accepts", per=("case",), name="MapDefaultsFilled", cases={"case": _map_default_cases})
def test_map_absent_fields_take_defaults(ipc, case):
    host, struct, steps = _map_sites(ipc.manifest.to_json(), ipc.manifest.id)[case]
    fields = _defaulted(ipc, struct)
    keys = {f.encode_name or f.name for f in fields}
    data = _edited_map(ipc, host, steps, lambda node: {k: v for k, v in node.items() if k not in keys})
    expected = _at(ipc.instance(host, "typical"), steps)
    expected = msgspec.structs.replace(expected, **{f.name: default_value(ipc, f) for f in fields})
    _judge_map(ipc, case, data, expected, f"without {', '.join(sorted(f.name for f in fields))} (defaulted fields)")



# -- an encoder never writes two keys a peer reads as one (R-VAL-6) ------------------------------
class _Key(enum.Enum):
    """A plain Enum (not IntEnum): its member is != 1 in Python, yet written as 1 (R-VAL-4)."""

    ONE = 1


NESTED = "nested"
COLLIDING = {NESTED: {_Key.ONE: "a", 1: "b"}}  # in-process: two Python keys, one key on the wire
COLLIDING_VIEW = {"$dict": [[NESTED, {"$dict": [[1, "a"], [1.0, "b"]]}]]}  # a testee: 1 and 1.0 in one map
COLLIDING_TEXT = {"in-process": "{_Key.ONE: 'a', 1: 'b'} (a plain Enum member whose value is 1, and 1)",
                  "testee": "{1: 'a', 1.0: 'b'} (a $dict view)"}


def _written_keys(data: bytes, position: int) -> Optional[list[Any]]:
    """The keys the encoder wrote in the map under NESTED of the field at `position` (None when
    the bytes hold no such map)."""
    from conformance.schema.wire_form import parse

    top = parse(data)
    if top.kind != "array" or len(top.items) <= position or top.items[position].kind != "map":
        return None
    field = top.items[position].items
    for key, value in zip(field[::2], field[1::2]):
        if key.kind == "str" and key.value == NESTED.encode() and value.kind == "map":
            return [(k.kind, k.value) for k in value.items[::2]]
    return None


@check("Accepts", per=("struct",), name="CollidingKeysNotWritten", cases={"struct": _any_map_structs})
def test_colliding_keys_not_written(ipc, struct):
    from conformance.schema.golden.view import to_view
    from conformance.testee.adapter import SubprocessAdapter

    spec = ipc.manifest.structs[struct]
    position = next(i for i, f in enumerate(spec.fields, 1) if f.type in ANY_MAPS)
    name = spec.fields[position - 1].name
    value = msgspec.structs.replace(ipc.instance(struct, "typical"), **{name: COLLIDING})
    testee = isinstance(ipc.adapter, SubprocessAdapter)
    shown = COLLIDING_TEXT["testee" if testee else "in-process"]
    try:
        if testee:
            view = to_view(ipc.instance(struct, "typical"))
            view[name] = COLLIDING_VIEW
            data = ipc.adapter.encode_view(view, struct, "msgpack")
        else:
            data = ipc.adapter.encode(value, "msgpack")
    except Exception as exc:
        if harness_error(exc):
            raise  # a crash or a hang is no refusal
        return  # refusing the value is allowed
    keys = _written_keys(data, position)
    if keys is None:
        raise_failure(Failure(f"{struct}.{name}: the encoder's bytes hold no map under {NESTED!r} in {name}",
                              "R-VAL-6", f"{ENCODE} ({name}['{NESTED}'] = {shown})", data=data), ipc)
    if len(keys) != 1:
        raise_failure(Failure(
            f"{struct}.{name}['{NESTED}']: the map {shown} was written with {len(keys)} keys "
            f"({', '.join(f'{kind} {v!r}' for kind, v in keys)}); they are one key to every Python peer, and "
            "SPEC R-VAL-6 allows only a refusal or one key", "R-VAL-6",
            f"{ENCODE} ({name}['{NESTED}'] = {shown}; msgpack, its bytes shown)",
            [f"$.{name}['{NESTED}']: expected 1 key, got {len(keys)}"], data), ipc)
