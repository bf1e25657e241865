"""HTTP JSON carries bytes as base64: the implementation's HTTP bridge decodes it into the struct,
and refuses malformed base64 naming the field.

`Decodes` and `RejectsMalformed` send one typical body through `validate_http` (pydantic's
JSON mode). `Corpus.<mode>` sends the RFC 4648 corpus below (SPEC R-HTTP-3) into every base64
field of the struct, at every list depth the field's type has, through each way a body is
validated: `json` (validate_http: the JSON text) and `python` (validate_http_python: the parsed
body, as a FastAPI server validates it). Every valid text must decode to its exact bytes, every
invalid one must be refused naming the field; one check per struct and mode lists every case it
gets wrong.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Callable, Optional

from conformance.compare import differences
from conformance.http_json import to_http_json
from conformance.plugin import check, harness_error
from conformance.suite.capability import require
from conformance.suite.failure import HTTP, Failure, raise_failure
from conformance.suite.fields import structs_with_field

JSON_CHARS = 300

#: name -> (base64 text, the exact bytes it decodes to): RFC 4648 §4 with padding, standard alphabet.
VALID: dict[str, tuple[str, bytes]] = {
    "Empty": ("", b""),
    "OneByte": ("QQ==", b"A"),
    "TwoBytes": ("QUI=", b"AB"),
    "ThreeBytes": ("QUJD", b"ABC"),
    "FourBytes": ("QUJDRA==", b"ABCD"),
    "PlusSlash": ("+/+/", b"\xfb\xff\xbf"),
    "ZeroBytes": ("AAAA", b"\x00\x00\x00"),
    "EveryByte": (base64.b64encode(bytes(range(256))).decode(), bytes(range(256))),
}

#: name -> a JSON value in a base64 position that MUST be refused (SPEC R-HTTP-3).
INVALID: dict[str, Any] = {
    "OutsideAlphabet": "QUJD$",
    "OutsideAlphabetInQuantum": "QU$D",
    "NonAscii": "QUJ\u00e9",
    "InnerSpace": "QU JD",
    "InnerNewline": "QUJD\nQUJD",
    "LineWrapped": "QUJD\r\nQUJD",
    "LeadingSpace": " QUJD",
    "TrailingSpace": "QUJD ",
    "LeadingNewline": "\nQUJD",
    "TrailingNewline": "QUJD\n",
    "UrlSafeDash": "-_-_",
    "UrlSafeUnderscore": "Pz8_",
    "MissingPadding": "QUI",
    "MissingPaddingTwo": "QQ",
    "PaddingShort": "QQ=",
    "ExtraPadding": "QUJD=",
    "ExtraPaddingTwo": "QQ===",
    "PaddingTooLong": "QUI==",
    "PaddingInside": "QQ==QUJD",
    "PaddingAlone": "==",
    "OneCharQuantum": "QUJDR",
    "NotStrInt": 65,
    "NotStrFloat": 1.5,
    "NotStrBool": True,
    "NotStrNull": None,
    "NotStrObject": {"data": "QUJD"},
    "NotStrList": ["QUJD"],
}

#: mode -> what validates the body, in words for failure messages
MODES = {"json": "validate_http: pydantic JSON mode on the JSON text",
         "python": "validate_http_python: pydantic Python mode on the parsed body, as FastAPI validates it"}
_CAPABILITY = {"json": "http", "python": "http_python"}
#: a valid text put before the case in a list position, so a bridge that reads only the first item fails
NEIGHBOUR = ("QQ==", b"A")


def _base64_structs(ipc: Any) -> list[str]:
    return structs_with_field(ipc, lambda f: "base64" in f.annotations)


def _json_note(text: str) -> str:
    return f"input: JSON {text if len(text) <= JSON_CHARS else text[:JSON_CHARS] + ' ...'}"


@check("HttpBase64", per=("struct",), name="Decodes", cases={"struct": _base64_structs})
def test_http_base64_decodes(ipc, struct):
    require(ipc, "http")
    expected = ipc.instance(struct, "typical")
    text = json.dumps(to_http_json(expected))
    got = ipc.adapter.validate_http(struct, text)
    diffs = differences(expected, got)
    if diffs:
        raise_failure(Failure(f"HTTP JSON for {struct} validated to a different struct", "R-HTTP-1", HTTP, diffs,
                              value=expected, notes=[_json_note(text)]), ipc)


@check("HttpBase64", per=("struct",), name="RejectsMalformed", cases={"struct": _base64_structs})
def test_http_base64_rejects_malformed(ipc, struct):
    require(ipc, "http")
    payload = to_http_json(ipc.instance(struct, "typical"))
    field = next(f.name for f in ipc.manifest.structs[struct].fields if "base64" in f.annotations)
    bad = ["not base64!"] if isinstance(payload[field], list) else "not base64!"
    payload[field] = bad
    text = json.dumps(payload)
    step = f"{HTTP} ({field} holds {bad!r}: not base64)"
    try:
        got = ipc.adapter.validate_http(struct, text)
    except Exception as exc:
        if harness_error(exc):
            raise  # a crash or a hang is no refusal
        if field not in str(exc):
            raise_failure(Failure(f"{struct}.{field}: malformed base64 was refused, but the error does not name "
                                  f"the field {field}: {type(exc).__name__}: {str(exc).splitlines()[0]}", "R-HTTP-2",
                                  step, notes=[_json_note(text)]), ipc)
        return
    held = getattr(got, field, got)
    raise_failure(Failure(f"{struct}.{field}: malformed base64 was accepted, not refused", "R-HTTP-2", step,
                          [f"$.{field}: expected a validation error naming {field}, got {held!r:.120}"],
                          notes=[_json_note(text)]), ipc)


# -- the RFC 4648 corpus, per field and validation mode -------------------------------------
def list_depth(t: Any) -> tuple[int, bool]:
    """How many lists a base64 field's type nests its bytes in, and whether the bytes position
    itself may be null (Optional stripped at every level)."""
    depth, nullable = 0, False
    while True:
        nullable = t.kind == "Union" and any(a.kind == "None" for a in t.args)
        if t.kind == "Union":
            arms = [a for a in t.args if a.kind != "None"]
            t = arms[0] if len(arms) == 1 else t
        if t.kind not in ("List", "VarTuple"):
            return depth, nullable
        depth, t = depth + 1, t.args[0]


def placed(value: Any, depth: int, neighbour: Any) -> tuple[Any, str]:
    """value at the innermost of `depth` lists, after `neighbour`, and its path ("[0][1]")."""
    if depth == 0:
        return value, ""
    inner, path = [neighbour, value], "[1]"
    for _ in range(depth - 1):
        inner, path = [inner], "[0]" + path
    return inner, path


def _validator(ipc: Any, mode: str) -> Callable[[str, dict[str, Any]], Any]:
    if mode == "json":
        return lambda struct, body: ipc.adapter.validate_http(struct, json.dumps(body))
    return lambda struct, body: ipc.adapter.validate_http_python(struct, json.loads(json.dumps(body)))


def judge(validate: Callable[[str, dict[str, Any]], Any], struct: str, body: dict[str, Any], field: str,
           expected: Optional[Any]) -> Optional[str]:
    """What went wrong validating body (None: right). expected None: the body must be refused
    naming the field; else the field must hold exactly `expected`."""
    try:
        got = validate(struct, body)
    except Exception as exc:
        if harness_error(exc):
            raise  # a crash or a hang is no refusal
        first = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if expected is not None:
            return f"valid base64 was refused: {first:.200}"
        if field not in str(exc):
            return f"refused, but the error does not name {field}: {first:.200}"
        return None
    held = getattr(got, field, got)
    if expected is None:
        return f"accepted as {held!r:.120}; it must be refused naming {field}"
    if type(held) is not type(expected) or held != expected or not _all_bytes(held):
        return f"decoded to {held!r:.120}, expected {expected!r:.120}"
    return None


def _all_bytes(value: Any) -> bool:
    if isinstance(value, list):
        return all(_all_bytes(v) for v in value)
    return type(value) is bytes


def _modes(ipc: Any) -> list[str]:
    return list(MODES)


@check("HttpBase64", per=("struct", "mode"), name="Corpus", cases={"struct": _base64_structs, "mode": _modes})
def test_http_base64_corpus(ipc, struct, mode):
    require(ipc, _CAPABILITY[mode])
    validate = _validator(ipc, mode)
    template = to_http_json(ipc.instance(struct, "typical"))
    wrong: list[str] = []
    for field in ipc.manifest.structs[struct].fields:
        if "base64" not in field.annotations:
            continue
        depth, nullable = list_depth(field.type_expr)
        cases: list[tuple[str, Any, Optional[Any]]] = [(n, text, raw) for n, (text, raw) in VALID.items()]
        cases += [(n, value, None) for n, value in INVALID.items() if not (value is None and nullable)]
        for name, value, raw in cases:
            sent, path = placed(value, depth, NEIGHBOUR[0])
            expected = None if raw is None else placed(raw, depth, NEIGHBOUR[1])[0]
            problem = judge(validate, struct, {**template, field.name: sent}, field.name, expected)
            if problem:
                wrong.append(f"$.{field.name}{path} <- {value!r} ({name}): {problem}")
    if wrong:
        raise_failure(Failure(f"{struct}: base64 in HTTP JSON judged wrongly by {MODES[mode]}", "R-HTTP-3",
                              f"{HTTP} ({mode} mode)", wrong,
                              notes=[_json_note(json.dumps(template)),
                                     "each case replaces the field's value in this body; list positions hold "
                                     f"{NEIGHBOUR[0]!r} first, the case second"]), ipc)
