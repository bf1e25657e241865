"""A minimal third-party implementation of the wire format, written from spec/SPEC.md.

Structs: generated from the bundled manifest (`ipc-conformance codegen`), here at import
time. Codec: plain msgspec with the extension types of SPEC section "Extensions" (1
array.array, 2 torch tensor, 3 numpy array). Deliberately small: no top-level str, no
out-of-band frames, no receive-path allow-list (PickleWrappers are refused from
untrusted peers, opened with plain pickle for trusted ones).
"""

from __future__ import annotations

import array
import pickle
import re
import struct
import sys
import types
from typing import Any, Union

import msgspec
import numpy as np
import torch

from conformance.schema.codegen import generate
from conformance.schema.manifest import load_manifest

MANIFEST = load_manifest("sglang-0.5.23")
structs = types.ModuleType("minimal_impl_structs")
sys.modules[structs.__name__] = structs  # so pickle finds the classes by name
exec(compile(generate(MANIFEST), structs.__name__, "exec"), structs.__dict__)

META = struct.Struct(">I")
#: SPEC R-TEN-3: cpu, or <type>:<index> with an index of 0 to 127 (torch's device index is 8-bit)
DEVICE = re.compile(r"cpu|[a-z][a-z0-9_]*:(?:[0-9]|[1-9][0-9]|1[01][0-9]|12[0-7])")


def _buffer(code: int, metadata: Any, raw: bytes) -> msgspec.msgpack.Ext:
    meta = msgspec.msgpack.encode(metadata)
    return msgspec.msgpack.Ext(code, META.pack(len(meta)) + meta + raw)


def enc_hook(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        return _buffer(2, [list(t.shape), str(t.dtype).removeprefix("torch."), str(obj.device)], raw)
    if isinstance(obj, np.ndarray):
        a = obj if obj.flags.c_contiguous else obj.copy()
        return _buffer(3, [list(a.shape), a.dtype.str], a.tobytes())
    if isinstance(obj, array.array):
        return _buffer(1, obj.typecode, obj.tobytes())
    # SPEC 3.1: numpy scalars from array maths travel as the value they stand for (bool first:
    # np.bool_ is true/false, never 0/1)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    raise TypeError(f"cannot encode {type(obj)}")


def ext_hook(code: int, data: memoryview) -> Any:
    if code not in (1, 2, 3):
        return msgspec.msgpack.Ext(code, bytes(data))
    (n,) = META.unpack_from(data)
    meta, raw = msgspec.msgpack.decode(data[4 : 4 + n]), bytes(data[4 + n :])
    if code == 1:
        out = array.array(meta)
        out.frombytes(raw)
        return out
    if code == 3:
        return np.frombuffer(raw, dtype=np.dtype(meta[1])).reshape(meta[0]).copy()
    shape, dtype, device = meta
    dt = getattr(torch, dtype)
    if str(dt).startswith("torch.q"):  # quantized: no raw-byte form, and reading one built from bytes crashes
        raise ValueError(f"tensor dtype {dtype} is quantized")
    t = torch.frombuffer(bytearray(raw), dtype=dt).reshape(shape) if raw else torch.empty(shape, dtype=dt)
    if device == "cpu":
        return t
    if not isinstance(device, str) or not DEVICE.fullmatch(device) or device.startswith(("cpu:", "meta:")):
        raise ValueError(f"tensor device {device!r} is not cpu nor <type>:<index of 0 to 127>")
    try:
        return t.to(device)
    except (AssertionError, RuntimeError, NotImplementedError) as exc:  # what torch raises for an absent device
        raise ValueError(f"tensor device {device!r} is not available here: {str(exc)[:100]}") from None


def dec_hook(tp: type, obj: Any) -> Any:
    if isinstance(obj, tp):
        return obj
    raise TypeError(f"expected {tp.__name__}, got {type(obj).__name__}")


def _messages() -> tuple:
    found = []

    def walk(cls: type) -> None:
        for sub in cls.__subclasses__():
            found.append(sub)
            walk(sub)

    for root in structs.MESSAGE_ROOTS:
        walk(root)
    return tuple(found) + (structs.PickleWrapper,) + tuple(structs.CUSTOM_MESSAGE_TYPES)


encoder = msgspec.msgpack.Encoder(enc_hook=enc_hook)
decoder = msgspec.msgpack.Decoder(Union[_messages() + (int, float, bool, bytes, None)],  # type: ignore[misc]
                                  dec_hook=dec_hook, ext_hook=ext_hook)


def encode(obj: Any, transport: str) -> bytes:
    if transport == "pickle":
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return encoder.encode(obj)


def decode(data: bytes, transport: str) -> Any:
    return pickle.loads(data) if transport == "pickle" else decoder.decode(data)
