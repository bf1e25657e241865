"""torch is imported where a tensor is met, not at start-up (it costs about a second of CPU): the
reference codec, its generated catalogue and the suite's collection run without importing it;
a message with a tensor still decodes to a real torch.Tensor, and a tensor field still refuses
what is not a tensor. Each case runs in a fresh interpreter (this one has torch loaded)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conformance.runtime.lazy_torch import torch as stand_in
from conformance.value_classes import CLASSES

ROOT = Path(__file__).resolve().parents[1]


def _fresh(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_message_without_tensors_never_imports_torch():
    out = _fresh("""
        import sys
        from reference_impl import codec, io_struct as S
        for transport in ("msgpack", "pickle"):
            sent = S.AbortReq(rid="r1", abort_all=True)
            got = codec.decode(codec.encode(sent, transport), transport, allow_pickle=True)
            assert got == sent, got
        print("torch" in sys.modules)
    """)
    assert out == "False"


def test_a_tensor_arrives_as_a_real_torch_tensor_and_a_non_tensor_is_refused():
    out = _fresh("""
        import sys
        from reference_impl import codec, io_struct as S
        from reference_impl.errors import WireError

        def message(states):
            return S.BatchEmbeddingOutput(rids=["r"], finished_reasons=[None], embeddings=[[0.5]], prompt_tokens=[1],
                                          cached_tokens=[0], placeholder_tokens_idx=None, placeholder_tokens_val=None,
                                          retraction_counts=[0], pooled_hidden_states=states)

        try:  # an int where a tensor belongs: refused as with torch.Tensor in the annotation
            codec.decode(codec.encode(message([5]), "msgpack"), "msgpack")
        except WireError as exc:
            print(exc)
        print("torch" in sys.modules)
        import msgspec
        import numpy as np
        from conformance.schema import wire_ext  # the wire's bytes of a tensor, made without torch

        raw = np.arange(6.0, dtype="<f4").tobytes()
        data = msgspec.msgpack.Encoder(enc_hook=wire_ext.enc_hook).encode(
            message([wire_ext.WireTensor((2, 3), "float32", "cpu", raw)]))
        print("torch" in sys.modules)
        got = codec.decode(data, "msgpack").pooled_hidden_states[0]
        import torch
        assert type(got) is torch.Tensor and got.shape == (2, 3) and got.numpy().tobytes() == raw, got
        print("torch" in sys.modules)
    """)
    assert out.splitlines() == ["msgpack decode: BatchEmbeddingOutput.pooled_hidden_states[0]: "
                                "Expected `Tensor`, got `int`", "False", "False", "True"]


def test_the_stand_in_is_torch_tensor_for_isinstance():
    import torch

    assert isinstance(torch.zeros(1), stand_in.Tensor)
    assert not isinstance([0.0], stand_in.Tensor)
    assert issubclass(torch.nn.Parameter, stand_in.Tensor) and not issubclass(list, stand_in.Tensor)
    assert stand_in.Tensor.__name__ == "Tensor"  # msgspec's "Expected `Tensor`" errors read as before


@pytest.mark.parametrize("value_class", CLASSES, ids=lambda c: c.name)
def test_a_value_class_says_whether_it_has_tensor_values(value_class):
    """`tensors` tells where a class applies without making a tensor; it must match its values."""
    from conformance.schema.manifest import T

    assert value_class.tensors == bool(value_class.values(T("Tensor")))


def test_collecting_the_suite_never_imports_torch(tmp_path):
    out = _fresh(f"""
        import sys
        from conformance.cli import main
        try:
            main(["run", "--report", {str(tmp_path / "report.json")!r}, "--", "-k", "Generated and AbortReq", "-q"])
        except SystemExit:
            pass
        print("torch" in sys.modules)
    """)
    assert out.splitlines()[-1] == "False", out
