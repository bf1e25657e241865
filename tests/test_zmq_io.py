"""reference_impl.zmq_io over real ZeroMQ sockets (ipc://, no mocks)."""

from __future__ import annotations

import asyncio
import multiprocessing
import pickle
from array import array
from pathlib import Path

import pytest
import torch
import zmq
import zmq.asyncio

from reference_impl import codec, zmq_io
from reference_impl.io_struct import AbortReq, BatchEmbeddingOutput, SamplingParams, TokenizedGenerateReqInput

TRANSPORTS = ("msgpack", "pickle")
TIMEOUT_MS = 5000
BIG = 64 << 20  # bytes: large enough that ZeroMQ is still writing when send would return untracked


# -- helpers ----------------------------------------------------------------------
@pytest.fixture
def ipc_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A short pytest temp dir: unix socket paths are limited to ~107 characters.
    return tmp_path_factory.mktemp("ipc")


def _configure(sock: zmq.Socket) -> zmq.Socket:
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    sock.setsockopt(zmq.SNDTIMEO, TIMEOUT_MS)
    return sock


def _pair(ctx: zmq.Context, endpoint: str, kind: str) -> tuple[zmq.Socket, zmq.Socket]:
    """(sender, receiver): PUSH/PULL or PAIR/PAIR; the receiver binds."""
    send_type, recv_type = (zmq.PUSH, zmq.PULL) if kind == "push_pull" else (zmq.PAIR, zmq.PAIR)
    receiver = _configure(ctx.socket(recv_type))
    receiver.bind(endpoint)
    sender = _configure(ctx.socket(send_type))
    sender.connect(endpoint)
    return sender, receiver


@pytest.fixture(params=["push_pull", "pair"])
def sockets(request: pytest.FixtureRequest, ipc_dir: Path):
    ctx = zmq.Context()
    sender, receiver = _pair(ctx, f"ipc://{ipc_dir}/s", request.param)
    try:
        yield sender, receiver
    finally:
        sender.close()
        receiver.close()
        ctx.term()


def _async_sockets(ipc_dir: Path,
                   kind: str = "pair") -> tuple[zmq.asyncio.Context, zmq.asyncio.Socket, zmq.asyncio.Socket]:
    ctx = zmq.asyncio.Context()
    sender, receiver = _pair(ctx, f"ipc://{ipc_dir}/a", kind)
    return ctx, sender, receiver


def _close_async(ctx: zmq.asyncio.Context, *socks: zmq.asyncio.Socket) -> None:
    for s in socks:
        s.close()
    ctx.term()


def tokenized(**extra) -> TokenizedGenerateReqInput:
    return TokenizedGenerateReqInput(
        rid="r1", input_text="hi", input_ids=array("q", [1, 2, 3]), input_embeds=None, mm_inputs=None,
        token_type_ids=None, sampling_params=SamplingParams(), return_logprob=False, logprob_start_len=-1,
        top_logprobs_num=0, token_ids_logprob=None, stream=False, **extra,
    )


def embedding_output(tensor: torch.Tensor | None = None) -> BatchEmbeddingOutput:
    return BatchEmbeddingOutput(
        rids=["r1", "r2"], finished_reasons=[{"type": "stop"}, None], embeddings=[[0.5, -1.25], 3.0],
        prompt_tokens=[3, 4], cached_tokens=[0, 1], placeholder_tokens_idx=None, placeholder_tokens_val=None,
        pooled_hidden_states=None if tensor is None else [tensor],
    )


def big_tensor(nbytes: int = BIG) -> torch.Tensor:
    return torch.arange(nbytes // 4, dtype=torch.float32)


def assert_same_embedding(got: BatchEmbeddingOutput, sent: BatchEmbeddingOutput, tensor: torch.Tensor) -> None:
    assert type(got) is BatchEmbeddingOutput
    assert got.embeddings == sent.embeddings and got.rids == sent.rids
    assert torch.equal(got.pooled_hidden_states[0], tensor)


# -- plain path (one frame) -------------------------------------------------------
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_struct_round_trip(sockets, transport):
    sender, receiver = sockets
    for obj in (tokenized(), AbortReq(rid="r1", abort_message="bye"), embedding_output()):
        zmq_io.send(sender, obj, transport)
        assert zmq_io.recv(receiver, transport) == obj


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_top_level_primitives(sockets, transport):
    sender, receiver = sockets
    for obj in ("hello", "", 42, -(2**40), None, True, 1.5, b"\x00raw"):
        zmq_io.send(sender, obj, transport)
        got = zmq_io.recv(receiver, transport)
        assert got == obj and type(got) is type(obj)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_plain_send_is_one_frame_identical_to_codec_encode(sockets, transport):
    # Upstream SGLang does socket.send(msgpack_encode(obj)) / send_pyobj: one frame.
    sender, receiver = sockets
    obj = embedding_output(torch.ones(4, 3))
    zmq_io.send(sender, obj, transport)
    assert receiver.recv_multipart() == [codec.encode(obj, transport)]


def test_default_transport_from_environment(sockets, monkeypatch):
    sender, receiver = sockets
    monkeypatch.setenv("IPC_TRANSPORT", "pickle")
    obj = AbortReq(rid="env")
    zmq_io.send(sender, obj)
    raw = receiver.recv()
    assert pickle.loads(raw) == obj and raw == codec.encode(obj, "pickle")
    zmq_io.send(sender, obj)
    assert zmq_io.recv(receiver) == obj


def test_pickle_wrapper_needs_a_trusted_peer(sockets):
    sender, receiver = sockets
    obj = tokenized(time_stats={"a": 1})
    zmq_io.send(sender, obj, "msgpack")
    with pytest.raises(codec.WireError, match="PickleWrapper refused"):
        zmq_io.recv(receiver, "msgpack")
    zmq_io.send(sender, obj, "msgpack")
    got = zmq_io.recv(receiver, "msgpack", allow_pickle=True)
    assert got.time_stats == {"a": 1} and got == obj
    assert obj.time_stats == {"a": 1}  # the sender's object was not wrapped in place


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_decode_errors_propagate_as_wire_error(sockets, transport):
    sender, receiver = sockets
    sender.send(b"\xc1 not a message")
    with pytest.raises(codec.WireError):
        zmq_io.recv(receiver, transport)
    zmq_io.send(sender, "still usable", transport)
    assert zmq_io.recv(receiver, transport) == "still usable"


def test_encode_errors_raise_before_sending(sockets):
    sender, receiver = sockets
    with pytest.raises(codec.WireError):
        zmq_io.send(sender, [1, 2, 3], "msgpack")  # a top-level list is not a message
    with pytest.raises(zmq.Again):
        zmq_io.recv(receiver, "msgpack", flags=zmq.NOBLOCK)


# -- zero-copy multipart ----------------------------------------------------------
def test_zero_copy_sends_large_tensor_as_separate_frames(sockets):
    sender, receiver = sockets
    tensor = torch.randn(300_000)  # 1.2 MB of float32, over the 1 MiB threshold
    obj = embedding_output(tensor)
    zmq_io.send(sender, obj, "msgpack", zero_copy=True)
    frames = receiver.recv_multipart()
    assert len(frames) > 1
    assert len(frames[1]) == tensor.numel() * 4 and len(frames[0]) < 1024
    assert_same_embedding(codec.decode_frames(frames, "msgpack"), obj, tensor)
    # and the receiving helper needs no flag for it
    zmq_io.send(sender, obj, "msgpack", zero_copy=True)
    assert_same_embedding(zmq_io.recv(receiver, "msgpack"), obj, tensor)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_zero_copy_round_trip_small_and_primitive(sockets, transport):
    sender, receiver = sockets
    for obj in (tokenized(), embedding_output(torch.ones(8)), "text", None):
        zmq_io.send(sender, obj, transport, zero_copy=True)
        got = zmq_io.recv(receiver, transport)
        if isinstance(obj, BatchEmbeddingOutput):
            assert_same_embedding(got, obj, obj.pooled_hidden_states[0])
        else:
            assert got == obj


def test_zero_copy_tensor_can_be_mutated_once_send_returns(sockets):
    # vLLM saw corrupted messages when a buffer was reused during an in-flight
    # zero-copy send; send must not return before ZeroMQ has let go of the tensor.
    sender, receiver = sockets
    tensor = big_tensor()
    original = tensor.clone()
    for round_ in range(3):
        zmq_io.send(sender, embedding_output(tensor), "msgpack", zero_copy=True)
        tensor.fill_(-1.0 - round_)  # in place, immediately after send returns
        got = zmq_io.recv(receiver, "msgpack")
        assert torch.equal(got.pooled_hidden_states[0], original), f"round {round_}: received mutated values"
        tensor.copy_(original)


def _unbound_sender(ctx: zmq.Context, endpoint: str, timeout_ms: int) -> zmq.Socket:
    """A sender connected where nobody listens: ZeroMQ queues its message and never lets go."""
    sender = _configure(ctx.socket(zmq.PAIR))
    sender.setsockopt(zmq.SNDTIMEO, timeout_ms)
    sender.connect(endpoint)
    return sender


def test_zero_copy_send_holds_until_released(ipc_dir):
    # Deterministic counterpart of the test above: with no peer, ZeroMQ keeps the tensor,
    # so a send that honours the tracker cannot return; it gives up at SNDTIMEO.
    ctx = zmq.Context()
    sender = _unbound_sender(ctx, f"ipc://{ipc_dir}/nobody", 300)
    try:
        with pytest.raises(zmq.NotDone):
            zmq_io.send(sender, embedding_output(big_tensor()), "msgpack", zero_copy=True)
    finally:
        sender.close()
        ctx.term()


# -- asyncio ----------------------------------------------------------------------
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_async_round_trip(ipc_dir, transport):
    async def main():
        ctx, sender, receiver = _async_sockets(ipc_dir, "push_pull")
        try:
            for obj in (tokenized(), AbortReq(rid="a"), "str", 7, None):
                await zmq_io.asend(sender, obj, transport)
                assert await zmq_io.arecv(receiver, transport) == obj
            tensor = torch.randn(300_000)
            await zmq_io.asend(sender, embedding_output(tensor), transport, zero_copy=True)
            assert_same_embedding(await zmq_io.arecv(receiver, transport), embedding_output(tensor), tensor)
        finally:
            _close_async(ctx, sender, receiver)

    asyncio.run(main())


def test_async_zero_copy_tensor_can_be_mutated_once_asend_returns(ipc_dir):
    async def main():
        ctx, sender, receiver = _async_sockets(ipc_dir)
        try:
            tensor = big_tensor()
            original = tensor.clone()
            for round_ in range(3):
                await zmq_io.asend(sender, embedding_output(tensor), "msgpack", zero_copy=True)
                tensor.fill_(-1.0 - round_)
                got = await zmq_io.arecv(receiver, "msgpack")
                assert torch.equal(got.pooled_hidden_states[0], original), f"round {round_}: received mutated values"
                tensor.copy_(original)
        finally:
            _close_async(ctx, sender, receiver)

    asyncio.run(main())


def test_async_zero_copy_send_holds_until_released(ipc_dir):
    async def main():
        ctx = zmq.asyncio.Context()
        sender = _unbound_sender(ctx, f"ipc://{ipc_dir}/nobody", 300)
        try:
            with pytest.raises(zmq.NotDone):
                await zmq_io.asend(sender, embedding_output(big_tensor()), "msgpack", zero_copy=True)
        finally:
            _close_async(ctx, sender)

    asyncio.run(main())


def test_async_errors(ipc_dir):
    async def main():
        ctx, sender, receiver = _async_sockets(ipc_dir)
        try:
            await zmq_io.asend(sender, tokenized(time_stats={"a": 1}), "msgpack")
            with pytest.raises(codec.WireError):
                await zmq_io.arecv(receiver, "msgpack")
            await zmq_io.asend(sender, tokenized(time_stats={"a": 1}), "msgpack")
            assert (await zmq_io.arecv(receiver, "msgpack", allow_pickle=True)).time_stats == {"a": 1}
            await sender.send(b"\xc1")
            with pytest.raises(codec.WireError):
                await zmq_io.arecv(receiver, "msgpack")
        finally:
            _close_async(ctx, sender, receiver)

    asyncio.run(main())


# -- a real second process --------------------------------------------------------
def _echo(endpoint: str) -> None:
    """Child process: per transport, echo every message (zero-copy) until "stop"."""
    ctx = zmq.Context()
    sock = _configure(ctx.socket(zmq.PAIR))
    sock.connect(endpoint)
    try:
        for transport in TRANSPORTS:
            while (obj := zmq_io.recv(sock, transport, allow_pickle=True)) != "stop":
                zmq_io.send(sock, obj, transport, zero_copy=True)
    finally:
        sock.close()
        ctx.term()


def test_cross_process_echo(ipc_dir):
    endpoint = f"ipc://{ipc_dir}/echo"
    ctx = zmq.Context()
    sock = _configure(ctx.socket(zmq.PAIR))
    # The child imports torch before it connects: the first send waits for it as long as a receive.
    sock.setsockopt(zmq.RCVTIMEO, 30_000)
    sock.setsockopt(zmq.SNDTIMEO, 30_000)
    sock.bind(endpoint)
    child = multiprocessing.get_context("spawn").Process(target=_echo, args=(endpoint,), daemon=True)
    child.start()
    try:
        tensor = big_tensor(4 << 20)
        for transport in TRANSPORTS:
            for obj in (tokenized(time_stats={"a": 1}), AbortReq(rid="x"), 5, None, embedding_output(tensor)):
                zmq_io.send(sock, obj, transport, zero_copy=isinstance(obj, BatchEmbeddingOutput))
                got = zmq_io.recv(sock, transport, allow_pickle=True)
                if isinstance(obj, BatchEmbeddingOutput):
                    assert_same_embedding(got, obj, tensor)
                else:
                    assert got == obj
            zmq_io.send(sock, "stop", transport)
        child.join(timeout=10)
        assert child.exitcode == 0
    finally:
        if child.is_alive():
            child.kill()
            child.join()
        sock.close()
        ctx.term()
