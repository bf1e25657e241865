"""Decoders accept every valid encoding, not only the canonical one (SPEC §3, R-VAL-2, R-MSG-5,
R-VEC-2): each golden vector, rewritten in a form a correct encoder elsewhere may write, must
decode to the same value.

Forms: ``float32`` (floats that fit, as float 32), ``int_floats`` (integral values of the
message's own float fields as ints), ``wide_ints`` (every int in its 64-bit form), ``short``
(trailing fields equal to their defaults left out), ``extra`` (an element after the last field).
Only the forms that change a vector's bytes are checked for it.
"""

from __future__ import annotations

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
from conformance.suite.failure import DECODE_RUNNER_BYTES, Failure, raise_failure
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


def _with_any_map(ipc, struct: str, replacement: Any) -> tuple[str, int, list, bytes]:
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
