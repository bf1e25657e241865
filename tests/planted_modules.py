"""One planted defect for each check module that had no planted adapter yet (tests/test_failure_helper.py
runs them with the others and reads every part of each failure message).

`PlantedModules` is the reference with six narrow defects, each reached only by its own checks:
its HTTP bridge ignores unknown keys (test_http), its receive paths leave the controller's out
(test_receive_paths), it decodes ndarrays read-only (test_tensor_memory), it refuses a tensor on a
device this machine lacks without naming the device (test_tensors), its unwrap loses the stamps of
a request's time stats (test_payloads), and its decoder refuses a map holding an unknown key
(test_accepts)."""

from __future__ import annotations

import json
from typing import Any, Mapping

import msgspec
import numpy as np

from reference_tools.adapter import ReferenceAdapter

PAYLOAD_POSITION = "TokenizedGenerateReqInput.time_stats"


def _read_only(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        value.setflags(write=False)
    elif isinstance(value, list):
        for item in value:
            _read_only(item)
    elif isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            _read_only(getattr(value, name))
    return value


class PlantedModules(ReferenceAdapter):
    def validate_http(self, struct: str, json_text: str) -> Any:
        known = set(self.classes()[struct].__struct_fields__)
        return super().validate_http(struct, json.dumps({k: v for k, v in json.loads(json_text).items() if k in known}))

    def receive_paths(self) -> Mapping[str, Any]:
        return {name: path for name, path in super().receive_paths().items() if name != "controller"}

    def decode(self, data: bytes, transport: str) -> Any:
        if b"no_such_field" in bytes(data):
            raise ValueError("a map with a key this decoder does not know")
        try:
            value = super().decode(data, transport)
        except Exception as exc:
            if "cuda" in str(exc).lower():
                raise ValueError("cannot restore this tensor") from None
            raise
        return _read_only(value)

    def unwrap(self, obj: Any) -> Any:
        """Its unwrap loses the stamps of a request's time stats (a reduced __getstate__ would)."""
        got = super().unwrap(obj)
        stats = getattr(got, "time_stats", None) if type(got).__name__ == PAYLOAD_POSITION.split(".")[0] else None
        if stats is not None and hasattr(stats, "stamps"):
            stats.stamps = {}
        return got
