"""Refusals: every input of golden/<manifest>/refusals.json MUST be refused (SPEC §13.2).

A decode case hands the implementation msgpack bytes that do not match the manifest; an
encode case asks it to encode a value that has no wire form. The check passes only when
the implementation refuses with an error of its declared kind (Adapter.refusal_errors; a
testee answers exactly the case's category, parse_error or serialize_error). Returning a
value fails, showing what came back; any other exception, a testee's runtime_error or a
crash fails as "crashed instead of refusing": hostile bytes must end in an error, not in a
broken process.
"""

from __future__ import annotations

import json
import os
import signal
from functools import lru_cache
from typing import Any, Callable, Optional

import pytest

from conformance.plugin import check

NO_CORPUS = "NoCorpus"


@lru_cache(maxsize=None)
def _corpus(manifest_json: bytes, manifest_id: str) -> dict[str, Any]:
    """{case id: Refusal} of the manifest, empty when it has no up-to-date refusals.json."""
    import msgspec

    from conformance.paths import golden_dir
    from conformance.schema.golden import manifest_digest, refusals
    from conformance.schema.manifest.model import Manifest

    path = golden_dir() / manifest_id / refusals.FILE
    if not path.exists():
        return {}
    text = path.read_text()
    if json.loads(text).get("manifest_sha256") != manifest_digest(msgspec.json.decode(manifest_json, type=Manifest)):
        return {}
    return {case.id: case for case in refusals.load(text)}


def _cases(ipc: Any) -> dict[str, Any]:
    return _corpus(ipc.manifest.to_json(), ipc.manifest.id)


def _ids(kind: str) -> Callable[[Any], list[str]]:
    def ids(ipc: Any) -> list[str]:
        return [i for i, case in _cases(ipc).items() if case.kind == kind] or [NO_CORPUS]

    return ids


def _case(ipc: Any, refusal: str) -> Any:
    if refusal == NO_CORPUS:
        pytest.skip(f"no up-to-date golden/{ipc.manifest.id}/refusals.json "
                    "(run `ipc-conformance golden update` for a new bundled manifest)")
    if "msgpack" not in ipc.transports:
        pytest.skip("refusal vectors are msgpack; this run does not check msgpack")
    return _cases(ipc)[refusal]


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # noqa: BLE001 - what an implementation accepted may not even print
        return f"a {type(value).__name__} that cannot be shown ({type(exc).__name__}: {exc})"
    return text if len(text) <= 300 else text[:300] + "..."


def _where(case: Any) -> str:
    return f"{case.struct or 'message'}{'.' + case.field if case.field else ''}"


def _must(case: Any) -> str:
    return f"it MUST refuse ({case.requirement}: {case.why})"


def _verdict(ipc: Any, case: Any, attempt: Callable[[], Any]) -> Optional[str]:
    """None when the implementation refused as it must, else why the check fails."""
    from conformance.testee.adapter import SubprocessAdapter, TesteeError, TesteeRuntimeError

    where, must = _where(case), _must(case)
    try:
        got = attempt()
    except TesteeError as exc:
        if exc.kind == case.category:
            return None
        return f"{where}: the testee answered {exc.kind}, not {case.category}: {exc}"
    except TesteeRuntimeError as exc:
        return f"{where}: crashed instead of refusing ({case.category} expected; {must}): {exc}"
    except Exception as exc:
        if isinstance(ipc.adapter, SubprocessAdapter):
            if not isinstance(exc, AssertionError):
                raise  # the runner's own failure, not the testee's answer
            # it answered a payload, and the reference cannot read it back
            return (f"{where}: accepted input {must}: the testee answered a payload instead of "
                    f"{case.category}, and the payload does not decode either ({type(exc).__name__}: {exc})")
        if isinstance(exc, ipc.adapter.refusal_errors):
            return None
        return (f"{where}: crashed instead of refusing ({must}): {type(exc).__name__}: {exc} "
                f"(not one of the adapter's refusal_errors)")
    action = "decoded it to" if case.kind == "decode" else "encoded it to"
    return f"{where}: accepted input {must}; {action} {_shown(got)}"


def _judge(ipc: Any, case: Any, attempt: Callable[[], Any]) -> None:
    """Fail the check unless the implementation refused. An in-process implementation meets
    extension payloads and values to encode (where tensors and arrays are built in native
    code) in a forked child: bytes that kill a process (a tensor of a quantized dtype built
    from raw bytes does) then fail this check instead of ending the whole run. The rest stays
    in process: a fork costs tens of milliseconds."""
    from conformance.testee.adapter import SubprocessAdapter

    native = case.family == "extension" or case.kind == "encode"
    if not native or isinstance(ipc.adapter, SubprocessAdapter) or not hasattr(os, "fork"):
        failure = _verdict(ipc, case, attempt)
    else:
        failure = _in_child(lambda: _verdict(ipc, case, attempt), case)
    if failure is not None:
        from conformance.suite.failure import DECODE_RUNNER_BYTES, ENCODE, Failure, raise_failure

        decode = case.kind == "decode"
        step = (f"{DECODE_RUNNER_BYTES} over {case.transport} (refusal case {case.id}: {case.why})" if decode
                else f"{ENCODE} over {case.transport} (refusal case {case.id}: {case.why})")
        shown = [] if decode else [f"view: {_shown_view(case.view)}"]  # the case holds the view itself
        raise_failure(Failure(failure, case.requirement, step, data=case.payload if decode else None,
                              notes=shown, kind="Failed"))


def _shown_view(view: Any, limit: int = 400) -> str:
    text = json.dumps(view, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + " ..."


def _in_child(verdict: Callable[[], Optional[str]], case: Any) -> Optional[str]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: judge, report through the pipe, leave without any cleanup
        os.close(read_end)
        try:
            outcome = {"failure": verdict()}
        except BaseException as exc:  # noqa: BLE001 - whatever happens, the parent hears of it
            outcome = {"failure": f"the check itself failed: {type(exc).__name__}: {exc}"}
        os.write(write_end, json.dumps(outcome).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        answer = pipe.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) or not answer:
        how = (f"signal {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
               else f"exit status {os.WEXITSTATUS(status)}")
        return f"{_where(case)}: crashed instead of refusing ({_must(case)}): the process died ({how})"
    failure: Optional[str] = json.loads(answer)["failure"]
    return failure


@check("Refuses", per=("refusal",), name="Decode", cases={"refusal": _ids("decode")})
def test_refuses_decode(ipc, refusal):
    case = _case(ipc, refusal)
    _judge(ipc, case, lambda: ipc.adapter.decode(case.payload, case.transport))


@check("Refuses", per=("refusal",), name="Encode", cases={"refusal": _ids("encode")})
def test_refuses_encode(ipc, refusal):
    from conformance.schema.golden.view import from_view

    case = _case(ipc, refusal)
    if "QuantizedTensor" in refusal:  # a quantized tensor is made through torch's quantizer
        from conformance.tensors import require_torch

        require_torch()
    value = from_view(case.view, ipc.adapter.classes())
    _judge(ipc, case, lambda: ipc.adapter.encode(value, case.transport))
