"""The RFC 4648 corpus of the HttpBase64 Corpus checks (SPEC R-HTTP-3) through SGLang's real FastAPI
app (run in `tox -e upstream`): `sglang.srt.entrypoints.http_server.app`, its routes for the two
base64 structs, FastAPI's own body validation and SGLang's validation error handler; only the
tokenizer manager behind the routes is a recorder of what each handler was handed. The route agrees
with `validate_http_python` (the suite's python mode) case by case: every case is judged right but
"QUJD=", which SGLang 0.5.23 takes (its expected failures list it)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conformance.http_json import to_http_json
from conformance.session import Session
from conformance.suite import test_http_base64 as checks

pytest.importorskip("sglang.srt.managers.io_struct", reason="needs SGLang: tox -e upstream")
# http_server imports far more than io_struct (jsonschema, xgrammar, soundfile, python-multipart: tox.ini);
# without python-multipart FastAPI raises a RuntimeError, not an ImportError
try:
    from sglang.srt.entrypoints import http_server
except Exception as exc:  # noqa: BLE001 - any failure to import the server is a reason to skip, named
    pytest.skip(f"SGLang's HTTP server does not import here: {type(exc).__name__}: {exc}", allow_module_level=True)
pytestmark = pytest.mark.sglang

ROUTES = {"UpdateWeightsFromTensorReqInput": "/update_weights_from_tensor",
          "LoadLoRAAdapterFromTensorsReqInput": "/load_lora_adapter_from_tensors"}
KNOWN = {"ExtraPadding"}  # "QUJD=": CPython's b64decode(validate=True) takes it


class Recorder:
    """The tokenizer manager behind the routes: records what a handler was handed, succeeds."""

    def __init__(self) -> None:
        self.handed: list[Any] = []

    async def update_weights_from_tensor(self, obj: Any, request: Any) -> tuple[bool, str]:
        self.handed.append(obj)
        return True, "recorded"

    async def load_lora_adapter_from_tensors(self, obj: Any, request: Any) -> Any:
        from sglang.srt.managers.io_struct import LoadLoRAAdapterReqOutput

        self.handed.append(obj)
        return LoadLoRAAdapterReqOutput(success=True)


@pytest.fixture(scope="module")
def served():
    from starlette.testclient import TestClient

    recorder = Recorder()
    saved = http_server.get_global_state()
    http_server.set_global_state(http_server._GlobalState(tokenizer_manager=recorder, template_manager=None,
                                                          scheduler_info={}))
    try:
        yield TestClient(http_server.app), recorder
    finally:
        http_server.set_global_state(saved)


def _post(served: Any, struct: str, body: dict[str, Any]) -> Any:
    """The struct the route's handler was handed, or a ValueError with the response it refused with."""
    client, recorder = served
    before = len(recorder.handed)
    response = client.post(ROUTES[struct], content=json.dumps(body), headers={"content-type": "application/json"})
    if response.status_code != 200:
        assert len(recorder.handed) == before, "a refused body reached the tokenizer manager"
        raise ValueError(f"HTTP {response.status_code}: {response.text}")
    return recorder.handed[-1]


@pytest.mark.parametrize("struct", sorted(ROUTES))
def test_the_route_judges_the_corpus_as_python_mode_does(served, struct):
    ipc = Session(impl="sglang")
    template = to_http_json(ipc.instance(struct, "typical"))
    field = next(f for f in ipc.manifest.structs[struct].fields if "base64" in f.annotations)
    depth, nullable = checks.list_depth(field.type_expr)
    python = lambda s, body: ipc.adapter.validate_http_python(s, json.loads(json.dumps(body)))
    cases = [(n, text, raw) for n, (text, raw) in checks.VALID.items()]
    cases += [(n, value, None) for n, value in checks.INVALID.items() if not (value is None and nullable)]
    wrong = set()
    for name, value, raw in cases:
        sent, _ = checks.placed(value, depth, checks.NEIGHBOUR[0])
        expected = None if raw is None else checks.placed(raw, depth, checks.NEIGHBOUR[1])[0]
        body = {**template, field.name: sent}
        route = checks.judge(lambda s, b: _post(served, s, b), struct, body, field.name, expected)
        assert (route is None) == (checks.judge(python, struct, body, field.name, expected) is None), (name, route)
        if route:
            wrong.add(name)
    assert wrong == KNOWN
