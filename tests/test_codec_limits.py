"""The codec's limits: read from the environment when first used, never at import; a bad
value is a ValueError naming the variable; limits can be set on the running process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from reference_impl import _codec_limits, codec
from reference_impl.errors import WireError


@pytest.mark.parametrize("name", ["IPC_MAX_MESSAGE_BYTES", "IPC_MAX_NESTING"])
def test_a_bad_environment_value_is_a_clear_error_at_first_use_not_at_import(name):
    code = ("import reference_impl.codec as c\n"
            "print('imported')\n"
            "try:\n"
            "    c.decode(c.encode(5, 'msgpack'), 'msgpack')\n"
            "except ValueError as exc:\n"
            "    print('refused:', exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, name: "64MiB"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "imported"
    assert lines[1].startswith("refused:") and name in lines[1] and "'64MiB'" in lines[1]


def test_limits_are_read_on_first_use_and_can_be_configured(monkeypatch):
    data = codec.encode("x" * 100, "msgpack")
    try:
        monkeypatch.setenv("IPC_MAX_MESSAGE_BYTES", "50")
        _codec_limits.configure(None)  # read the environment again on next use
        with pytest.raises(WireError, match="over the limit of 50 bytes"):
            codec.decode(data, "msgpack")
        _codec_limits.configure(_codec_limits.Limits(max_message_bytes=None))
        assert codec.decode(data, "msgpack") == "x" * 100
        assert codec.decode(data, "msgpack", max_bytes=0) == "x" * 100
    finally:
        _codec_limits.configure(None)


def test_the_public_face_keeps_its_api_with_docstrings():
    assert codec.__all__ == ["TRANSPORTS", "WireError", "decode", "decode_frames", "default_transport", "encode",
                             "encode_frames", "message_types", "register_custom_types", "resolve_transport",
                             "unwrap", "wrap_fields"]
    for name in codec.__all__:
        obj = getattr(codec, name)
        if callable(obj):
            assert (obj.__doc__ or "").strip(), f"codec.{name} has no docstring"
